/* SPDX-License-Identifier: BSD-3-Clause */
/* bench_resp.c: RESP parser throughput, echomq against hiredis's reader.
 *
 * Builds the bytes of realistic XREADGROUP replies (COUNT 100 and 1000,
 * each entry one field "data" with a 100-byte payload, as Redis 7 sends
 * them over RESP2), then parses them again and again with both readers,
 * feeding 16 KiB at a time as a socket read would. Rounds alternate
 * between the readers so machine noise hits both alike; the best round of
 * each is reported. Both produce a full reply tree the caller can walk and
 * free: echomq's with views into its buffer, hiredis's with copies.
 *
 * Usage: bench_resp [rounds] [megabytes-per-round]
 */
#include "resp/resp.h"

#include <hiredis/read.h>
#include <hiredis/hiredis.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FEED 16384

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Appends printf output to a growing buffer. */
typedef struct sbuf {
    char *p;
    size_t len, cap;
} sbuf;

static void add(sbuf *b, const void *data, size_t n) {
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2;
        b->p = realloc(b->p, b->cap);
        if (b->p == NULL) {
            perror("realloc");
            exit(1);
        }
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
}

static void addf(sbuf *b, const char *fmt, const char *s) {
    char tmp[256];
    int n = snprintf(tmp, sizeof tmp, fmt, strlen(s), s);
    add(b, tmp, (size_t)n);
}

/* The RESP2 bytes of XREADGROUP ... COUNT count STREAMS jobs >. */
static sbuf xreadgroup_reply(int count) {
    sbuf b = {0};
    char payload[101];
    for (int i = 0; i < 100; i++)
        payload[i] = (char)('a' + i % 26);
    payload[100] = '\0';
    add(&b, "*1\r\n*2\r\n", 8);
    addf(&b, "$%zu\r\n%s\r\n", "jobs");
    char head[32];
    int n = snprintf(head, sizeof head, "*%d\r\n", count);
    add(&b, head, (size_t)n);
    for (int i = 0; i < count; i++) {
        char id[32];
        snprintf(id, sizeof id, "1732924800%03d-%d", i % 1000, i);
        add(&b, "*2\r\n", 4);
        addf(&b, "$%zu\r\n%s\r\n", id);
        add(&b, "*2\r\n", 4);
        addf(&b, "$%zu\r\n%s\r\n", "data");
        addf(&b, "$%zu\r\n%s\r\n", payload);
    }
    return b;
}

/* Parses the reply `copies` times with echomq's reader; returns seconds. */
static double run_echomq(const sbuf *reply, int copies, size_t *checksum) {
    emq__resp_reader *r = emq__resp_reader_new(NULL);
    double start = now_s();
    int parsed = 0;
    for (int c = 0; c < copies; c++) {
        for (size_t off = 0; off < reply->len; off += FEED) {
            size_t n = reply->len - off < FEED ? reply->len - off : FEED;
            if (emq__resp_feed(r, reply->p + off, n, NULL) != EMQ_OK)
                exit(1);
            emq_reply *out;
            while (emq__resp_next(r, &out, NULL) == EMQ_OK) {
                const emq_reply *entries =
                    emq_reply_at(emq_reply_at(out, 0), 1);
                *checksum += emq_reply_len(entries);
                emq_reply_free(out);
                parsed++;
            }
        }
    }
    double t = now_s() - start;
    emq__resp_reader_free(r);
    if (parsed != copies) {
        fprintf(stderr, "echomq parsed %d of %d replies\n", parsed, copies);
        exit(1);
    }
    return t;
}

static double run_hiredis(const sbuf *reply, int copies, size_t *checksum) {
    redisReader *r = redisReaderCreate();
    double start = now_s();
    int parsed = 0;
    for (int c = 0; c < copies; c++) {
        for (size_t off = 0; off < reply->len; off += FEED) {
            size_t n = reply->len - off < FEED ? reply->len - off : FEED;
            if (redisReaderFeed(r, reply->p + off, n) != REDIS_OK)
                exit(1);
            void *out;
            while (redisReaderGetReply(r, &out) == REDIS_OK && out) {
                redisReply *rep = out;
                *checksum += rep->element[0]->element[1]->elements;
                freeReplyObject(out);
                parsed++;
            }
        }
    }
    double t = now_s() - start;
    redisReaderFree(r);
    if (parsed != copies) {
        fprintf(stderr, "hiredis parsed %d of %d replies\n", parsed, copies);
        exit(1);
    }
    return t;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 7;
    double mb = argc > 2 ? atof(argv[2]) : 200.0;
    int counts[] = {100, 1000};
    printf("RESP parser: XREADGROUP replies, 100-byte payloads, %d rounds of "
           "~%.0f MB each, best round shown\n\n",
           rounds, mb);
    printf("%-7s %-8s %10s %12s %12s %8s\n", "COUNT", "reader", "MB/s",
           "replies/s", "entries/s", "vs hir.");
    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
        sbuf reply = xreadgroup_reply(counts[k]);
        int copies = (int)(mb * 1e6 / (double)reply.len);
        if (copies < 1)
            copies = 1;
        double best_e = 1e30, best_h = 1e30;
        size_t sum_e = 0, sum_h = 0;
        for (int round = 0; round < rounds; round++) {
            double te = run_echomq(&reply, copies, &sum_e);
            double th = run_hiredis(&reply, copies, &sum_h);
            if (te < best_e)
                best_e = te;
            if (th < best_h)
                best_h = th;
        }
        if (sum_e != sum_h) {
            fprintf(stderr, "readers disagree: %zu != %zu entries\n", sum_e,
                    sum_h);
            return 1;
        }
        double bytes = (double)reply.len * copies;
        printf("%-7d %-8s %10.1f %12.0f %12.0f %7.2fx\n", counts[k], "echomq",
               bytes / best_e / 1e6, copies / best_e,
               copies * (double)counts[k] / best_e, best_h / best_e);
        printf("%-7d %-8s %10.1f %12.0f %12.0f %7.2fx\n", counts[k], "hiredis",
               bytes / best_h / 1e6, copies / best_h,
               copies * (double)counts[k] / best_h, 1.0);
        free(reply.p);
    }
    return 0;
}
