/*
 * oracle — answers for wire forms read from stdin, one hex line each ("-"
 * is the empty string): prints "<verify> <parse>" (fg_status_name) per line.
 * The Go differential test (firmware/vectors) feeds it random changes of
 * valid tokens and compares every answer with Go's.
 *
 * usage: oracle <tokens.txt>   (its key lines are the trusted ring)
 */
#include "testutil.h"

#include <string.h>

int main(int argc, char **argv)
{
    static char line[8192];
    static uint8_t wire[4096];
    static fg_key keys[TU_MAX_KEYS];
    fg_keyring ring;
    fg_token t;
    if (argc != 2 || tu_load_ring(argv[1], keys, &ring) != 0) {
        fprintf(stderr, "usage: oracle <tokens.txt with key lines>\n");
        return 2;
    }
    while (fgets(line, sizeof line, stdin) != NULL) {
        long n;
        fg_status v, p;
        line[strcspn(line, "\r\n")] = '\0';
        if ((n = tu_unhex(line, wire, sizeof wire)) < 0) {
            fprintf(stderr, "oracle: bad hex line\n");
            return 2;
        }
        v = fg_token_verify(&ring, (const char *)wire, (size_t)n, &t);
        p = fg_token_parse((const char *)wire, (size_t)n, &t);
        printf("%s %s\n", fg_status_name(v), fg_status_name(p));
    }
    return fflush(stdout) == 0 ? 0 : 1;
}
