/*
 * fg_storage_file.h — an example fg_storage over one POSIX file: slot k is
 * bytes [k*FG_FENCE_RECORD_LEN, (k+1)*FG_FENCE_RECORD_LEN) of the file, and
 * every write is followed by fsync before it reports success.
 */
#ifndef FG_STORAGE_FILE_H
#define FG_STORAGE_FILE_H

#include "fencegate.h"

#ifdef __cplusplus
extern "C" {
#endif

/* fg_file_storage is the state of one open file; the caller owns it. */
typedef struct {
    int fd;
} fg_file_storage;

/*
 * fg_file_storage_open opens (creating, mode 0600) the fence file path and
 * sets *storage to read and write its slots through fs, which must outlive
 * storage. A file it creates is made durable in its directory (fsync of the
 * directory). Returns 0, or -1 with errno set.
 */
int fg_file_storage_open(fg_file_storage *fs, const char *path, fg_storage *storage);

/* fg_file_storage_close closes the file; returns 0, or -1 with errno set. */
int fg_file_storage_close(fg_file_storage *fs);

#ifdef __cplusplus
}
#endif

#endif /* FG_STORAGE_FILE_H */
