/*
 * statx_compat: drops AT_NO_AUTOMOUNT from statx(2) and fstatat(2) before the kernel sees it.
 *
 * gVisor release 20221219 (Debian bookworm's runsc) refuses AT_NO_AUTOMOUNT with EINVAL,
 * and coreutils' ls and stat always pass it, so under gVisor they fail on every path
 * ("cannot access '/': Invalid argument"). The flag only suppresses triggering an
 * automount point; a sandbox has none, so dropping it changes nothing under runc either.
 * Loaded into every process of the runner image through /etc/ld.so.preload.
 */
#define _GNU_SOURCE
#include <sys/syscall.h>
#include <unistd.h>

#define AT_NO_AUTOMOUNT_FLAG 0x800

struct statx;
struct stat;

int statx(int dirfd, const char *path, int flags, unsigned int mask, struct statx *buf)
{
    return (int)syscall(SYS_statx, dirfd, path, flags & ~AT_NO_AUTOMOUNT_FLAG, mask, buf);
}

int fstatat(int dirfd, const char *path, struct stat *buf, int flags)
{
    return (int)syscall(SYS_newfstatat, dirfd, path, buf, flags & ~AT_NO_AUTOMOUNT_FLAG);
}

int fstatat64(int dirfd, const char *path, struct stat *buf, int flags)
{
    return (int)syscall(SYS_newfstatat, dirfd, path, buf, flags & ~AT_NO_AUTOMOUNT_FLAG);
}
