/* deadletter.c: moving poison entries to the dead letters, and recording
 * why deliveries failed.
 *
 * The move is one script over keys of one hashtag (the stream, its dead-
 * letter stream and the group's failure reasons), so it is atomic and
 * legal in a cluster. It checks that the entry is still pending for the
 * group first: when two consumers race on one entry, or recovery runs
 * again, only the first move adds a dead letter (contract 8). The write
 * comes before the acknowledgement, so a refused write (OOM) leaves the
 * entry pending instead of losing it. The delivery count stored is the
 * server's, read inside the script.
 *
 * A dead letter holds the origin first, then the entry's own fields:
 *   emq.id <id> emq.group <group> emq.consumer <consumer>
 *   emq.deliveries <n> emq.reason <text> <field> <value> ...
 */
#include "consumer.h"

#include <stdio.h>
#include <string.h>

static const char deadletter_script[] =
    "local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)\n"
    "if #p == 0 then return 0 end\n"
    "local reason = ARGV[4]\n"
    "if reason == '' then\n"
    "  reason = redis.call('HGET', KEYS[3], ARGV[2])\n"
    "  if not reason then\n"
    "    reason = 'delivered ' .. p[1][4] .. ' times without an "
    "acknowledgement'\n"
    "  end\n"
    "end\n"
    "local args = {'emq.id', ARGV[2], 'emq.group', ARGV[1],\n"
    "  'emq.consumer', ARGV[3], 'emq.deliveries', tostring(p[1][4]),\n"
    "  'emq.reason', reason}\n"
    "for i = 5, #ARGV do args[#args + 1] = ARGV[i] end\n"
    "redis.call('XADD', KEYS[2], '*', unpack(args))\n"
    "redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])\n"
    "redis.call('HDEL', KEYS[3], ARGV[2])\n"
    "return 1\n";

emq_status emq_deadletter_defer(emq_consumer_t *c, const batch_item *item,
                                const char *reason, emq_error *err) {
    size_t npairs = emq_reply_len(item->fields) / 2;
    size_t argc = 10 + 2 * npairs;
    const char **argv = emq_alloc(argc * sizeof *argv);
    size_t *lens = emq_alloc(argc * sizeof *lens);
    if (argv == NULL || lens == NULL) {
        emq_free(argv);
        emq_free(lens);
        return emq_error_set(err, EMQ_ENOMEM, 0, "out of memory");
    }
    const char *fixed[] = {"EVAL", deadletter_script, "3", c->keys.stream,
                           c->keys.dead, c->reasons_key, c->group,
                           item->id.str, c->name, reason};
    for (size_t i = 0; i < 10; i++) {
        argv[i] = fixed[i];
        lens[i] = strlen(fixed[i]);
    }
    for (size_t i = 0; i < 2 * npairs; i++)
        argv[10 + i] = emq_reply_str(emq_reply_at(item->fields, i), &lens[10 + i]);
    for (size_t i = 10; i < argc; i++)
        if (argv[i] == NULL) {
            argv[i] = "";
            lens[i] = 0;
        }
    emq_status st =
        emq_consumer_defer(c, DEFERRED_DEAD, (int)argc, argv, lens, err);
    emq_free(argv);
    emq_free(lens);
    return st;
}

emq_status emq_reason_defer(emq_consumer_t *c, const batch_item *item,
                            const char *reason, emq_error *err) {
    if (reason == NULL) {
        const char *argv[] = {"HDEL", c->reasons_key, item->id.str};
        return emq_consumer_defer(c, DEFERRED_REASON, 3, argv, NULL, err);
    }
    const char *argv[] = {"HSET", c->reasons_key, item->id.str, reason};
    return emq_consumer_defer(c, DEFERRED_REASON, 4, argv, NULL, err);
}
