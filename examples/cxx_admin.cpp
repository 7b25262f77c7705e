/* SPDX-License-Identifier: BSD-3-Clause */
/* cxx_admin.cpp: the admin verbs from C++ (echomq.hpp), on a queue with
 * work in every state.
 *
 *   cxx_admin URL QUEUE
 *
 * Creates a group, produces five entries, and lets a pull consumer take
 * them: two acknowledged, one dead-lettered, two left unsettled when it
 * closes. Then, with echomq::admin: the description, the pending list
 * (two entries of the consumer), the dead letter and its requeue, the
 * group's cursor moved back to the head, pruning (the only consumer holds
 * entries: kept), ack-aware trimming, a raw command (XLEN), the queue
 * found by scan, the group destroyed, and a topic of two partitions
 * created and reached through a partition's view. Each step checks its
 * result; exits 0, or prints the first that differs and exits 1. CI
 * builds it against the installed library and runs it on a private
 * redis-server.
 */
#include "echomq.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

/* Throws what differs: main prints it. */
void expect(bool ok, const std::string &what) {
    if (!ok)
        throw std::runtime_error(what);
}

} // namespace

int main(int argc, char **argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: cxx_admin URL QUEUE\n");
        return 2;
    }
    const std::string queue = argv[2];
    try {
        echomq::conf conf;
        conf.set("url", argv[1]).set("queue", queue);
        echomq::admin admin(conf);
        expect(admin.group_create("audit", "head"), "group_create: created");
        expect(!admin.group_create("audit", "head"),
               "group_create again: existed already");
        {
            echomq::producer producer(conf);
            for (int i = 0; i < 5; i++)
                producer.produce({{"n", std::to_string(i)}});
        }

        /* Two acknowledged, one dead, two left in hand. */
        std::string dead_origin;
        {
            echomq::conf cc;
            cc.set("url", argv[1]).set("queue", queue);
            cc.set("group", "audit").set("consumer", "auditor-1");
            cc.set("start", "head").set("block_ms", "100");
            cc.set("log.level", "error"); /* the two left are on purpose */
            echomq::consumer consumer(cc);
            std::vector<echomq::polled> got;
            auto deadline = std::chrono::steady_clock::now() +
                            std::chrono::seconds(30);
            while (got.size() < 5 &&
                   std::chrono::steady_clock::now() < deadline)
                for (echomq::polled &e : consumer.poll(5 - got.size(), 200))
                    got.push_back(std::move(e));
            expect(got.size() == 5, "poll: 5 entries within 30 s");
            consumer.ack(got[0]);
            consumer.ack(got[1]);
            consumer.dead(got[2], "malformed");
            dead_origin = got[2].id();
            /* The two unsettled stay pending to auditor-1. */
            consumer.close(500);
        }

        echomq::queue_info info = admin.describe();
        expect(info->exists && info->length == 5, "describe: 5 entries");
        expect(info->ngroups == 1 && info->groups[0].pending == 2,
               "describe: 2 pending in group audit");
        expect(echomq::to_json(*info).find("\"audit\"") != std::string::npos,
               "describe's JSON names the group");

        std::vector<emq_pending_entry> pending = admin.pending("audit");
        expect(pending.size() == 2, "pending: 2 entries");
        expect(std::string(pending[0].consumer) == "auditor-1",
               "pending: held by auditor-1");
        expect(admin.pending("audit", "nobody").empty(),
               "pending of another consumer: none");

        echomq::dead_letters letters = admin.dead_list();
        expect(letters.size() == 1, "dead_list: 1 letter");
        expect(std::string(letters[0].reason) == "malformed" &&
                   dead_origin == letters[0].origin_id.str,
               "dead_list: its reason and origin");
        expect(letters.json().find("malformed") != std::string::npos,
               "dead letters' JSON carries the reason");
        expect(admin.dead_requeue({letters[0].id.str}) == 1,
               "dead_requeue: 1 moved");
        expect(admin.dead_list().empty(), "dead_list after requeue: empty");
        expect(admin.dead_purge() == 0, "dead_purge: nothing left");

        expect(admin.group_setid("audit", "head") == 6,
               "group_setid head: 6 entries to hand out again");
        emq_prune_result pruned = admin.prune_consumers("audit", 0);
        expect(pruned.removed == 0 && pruned.kept == 1,
               "prune_consumers: the only consumer holds entries: kept");
        emq_trim_result trimmed = admin.trim_acked();
        expect(trimmed.removed == 0 && !trimmed.no_groups,
               "trim_acked: the group needs every entry");

        echomq::reply xlen = admin.command({"XLEN", info->stream});
        expect(emq_reply_integer(xlen.get()) == 6, "XLEN: 6");

        std::vector<std::string> queues =
            echomq::admin::scan_queues(conf, queue);
        expect(queues.size() == 1 && queues[0] == queue,
               "scan_queues: finds the queue");

        expect(admin.group_destroy("audit"), "group_destroy: destroyed");
        expect(!admin.group_destroy("audit"), "group_destroy again: none");
        expect(admin.trim_acked().no_groups, "trim_acked: no group left");

        /* A topic of two partitions, and one partition's view. */
        echomq::conf tc;
        tc.set("url", argv[1]).set("queue", queue + "-topic");
        tc.set("partitions", "2");
        echomq::admin topic(tc);
        topic.topic_create();
        expect(topic.topic_partitions() == 2 && topic.partition_count() == 2,
               "topic: 2 partitions recorded");
        echomq::admin_view part = topic.partition(1);
        expect(part.group_create("audit", "new"), "partition 1: group");
        expect(std::string(part.describe()->stream).find(".1}") !=
                   std::string::npos,
               "partition 1's stream");
        bool refused = false;
        try {
            topic.partition(5);
        } catch (const echomq::error &x) {
            refused = x.code() == EMQ_EINVAL;
        }
        expect(refused, "partition 5 of 2: EMQ_EINVAL");

        std::printf("cxx_admin: described, listed 2 pending, requeued 1 "
                    "dead letter, moved the cursor, pruned, trimmed, "
                    "destroyed the group, made a topic of 2\n");
        return 0;
    } catch (const echomq::error &e) {
        std::fprintf(stderr, "cxx_admin: %s (%s)\n", e.what(),
                     emq_status_name(e.code()));
        return 1;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "cxx_admin: %s\n", e.what());
        return 1;
    }
}
