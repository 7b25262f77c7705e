/* main.c: the echomq command-line tool. Uses only the public header. */
#include "echomq.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *out) {
    fprintf(out,
            "usage: echomq [--help] [--version] <command> [options]\n"
            "\n"
            "echomq: reliable work queues on Redis and Valkey Streams.\n"
            "\n"
            "Options:\n"
            "  -h, --help     show this help and exit\n"
            "      --version  print the echomq and libechomq versions\n"
            "\n"
            "Commands arrive in later releases: produce, consume, info,\n"
            "pending, group, consumers, dead, trim, demo.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        unsigned v = emq_version();
        printf("echomq %s (libechomq %u.%u.%u)\n", EMQ_VERSION_STRING,
               (v >> 16) & 0xff, (v >> 8) & 0xff, v & 0xff);
        return 0;
    }
    fprintf(stderr, "echomq: unknown command or option '%s'; see 'echomq --help'\n",
            argv[1]);
    return 2;
}
