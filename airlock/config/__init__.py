"""Agent configuration: ``airlock.yaml`` (or ``airlock.d/*.yaml``) compiled into AgentConfigs.

Each agent is an AgentSpec (provider, system prompt, tools, …) plus its own sandbox
(backend, isolation, network allow-list, credentials by secret name, resources) and turn
defaults. Every problem is reported as ``file:line:col: key: message``.
"""

from airlock.sandbox import LOCAL_MODEL

from ._discover import CONFIG_ENV, config_files, find_config, load_config
from ._errors import ConfigIssue, InvalidConfigError
from ._load import compile_documents
from ._model import AgentConfig, AirlockConfig
from ._schema import Backend, SecretSource
from ._secrets import ConfigSecretResolver
from ._tree_budget import TreeBudget, TreeDowngrade, TreeIncrease
from ._values import parse_duration, parse_quantity
from ._yaml import LocatedDocument, load_yaml

__all__ = [
    "CONFIG_ENV",
    "LOCAL_MODEL",
    "AgentConfig",
    "AirlockConfig",
    "Backend",
    "ConfigIssue",
    "ConfigSecretResolver",
    "InvalidConfigError",
    "LocatedDocument",
    "SecretSource",
    "TreeBudget",
    "TreeDowngrade",
    "TreeIncrease",
    "compile_documents",
    "config_files",
    "find_config",
    "load_config",
    "load_yaml",
    "parse_duration",
    "parse_quantity",
]
