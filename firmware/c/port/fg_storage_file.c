/*
 * fg_storage_file.c — see fg_storage_file.h. POSIX (Linux); the file is
 * written with pwrite and made durable with fsync, so a record the library
 * was told is written survives power loss, and a write cut short spoils only
 * its own slot (the other slot's bytes are never rewritten).
 */
#define _POSIX_C_SOURCE 200809L
#include "fg_storage_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int file_read(void *ctx, unsigned slot, uint8_t *buf, size_t len)
{
    fg_file_storage *fs = ctx;
    off_t at = (off_t)slot * FG_FENCE_RECORD_LEN;
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(fs->fd, buf + got, len - got, at + (off_t)got);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            return -1;
        }
        if (n == 0) { /* past the end: a slot never written reads as zeros */
            memset(buf + got, 0, len - got);
            return 0;
        }
        got += (size_t)n;
    }
    return 0;
}

static int file_write(void *ctx, unsigned slot, const uint8_t *buf, size_t len)
{
    fg_file_storage *fs = ctx;
    off_t at = (off_t)slot * FG_FENCE_RECORD_LEN;
    size_t put = 0;
    while (put < len) {
        ssize_t n = pwrite(fs->fd, buf + put, len - put, at + (off_t)put);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return -1;
        }
        put += (size_t)n;
    }
    return fsync(fs->fd) == 0 ? 0 : -1;
}

/* sync_dir makes a new file's directory entry durable. */
static int sync_dir(const char *path)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    size_t n = slash == NULL ? 1 : (size_t)(slash - path);
    int fd, rc;
    if (slash == NULL) {
        dir[0] = '.';
    } else if (n == 0) {
        dir[0] = '/';
        n = 1;
    } else if (n >= sizeof dir) {
        errno = ENAMETOOLONG;
        return -1;
    } else {
        memcpy(dir, path, n);
    }
    dir[n] = '\0';
    if ((fd = open(dir, O_RDONLY | O_DIRECTORY)) < 0) {
        return -1;
    }
    rc = fsync(fd);
    close(fd);
    return rc;
}

int fg_file_storage_open(fg_file_storage *fs, const char *path, fg_storage *storage)
{
    int created = 0;
    fs->fd = open(path, O_RDWR | O_CLOEXEC);
    if (fs->fd < 0 && errno == ENOENT) {
        fs->fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        created = 1;
    }
    if (fs->fd < 0) {
        return -1;
    }
    if (created && (fsync(fs->fd) != 0 || sync_dir(path) != 0)) {
        int saved = errno;
        close(fs->fd);
        fs->fd = -1;
        errno = saved;
        return -1;
    }
    storage->read = file_read;
    storage->write = file_write;
    storage->ctx = fs;
    return 0;
}

int fg_file_storage_close(fg_file_storage *fs)
{
    int rc = close(fs->fd);
    fs->fd = -1;
    return rc;
}
