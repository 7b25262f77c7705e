/* SPDX-License-Identifier: BSD-3-Clause */
/* cxx_poll.cpp: a pull consumer from C++ (echomq.hpp), entries settled on
 * other threads.
 *
 *   cxx_poll URL QUEUE
 *
 * Produces six jobs: four "ok", one "flaky" and one "bad". The main thread
 * polls them (echomq::consumer::poll) and hands each batch to a thread of
 * its own, which settles every entry: "ok" acknowledged, "flaky" retried
 * after 50 ms on its first delivery and acknowledged on its second, "bad"
 * dead-lettered. An entry (echomq::polled) is the caller's until its
 * destructor, so it moves to the settling thread with the batch. Then it
 * checks that settling an entry twice is refused (EMQ_EINVAL), closes the
 * consumer, and checks with the admin verbs that one dead letter holds
 * the reason and nothing is pending. Exits 0, or prints what differs and
 * exits 1. CI builds it against the installed library and runs it on a
 * private redis-server.
 */
#include "echomq.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char **argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: cxx_poll URL QUEUE\n");
        return 2;
    }
    try {
        echomq::conf conf;
        conf.set("url", argv[1]).set("queue", argv[2]);
        {
            echomq::producer producer(conf);
            for (const char *kind : {"ok", "flaky", "ok", "bad", "ok", "ok"})
                producer.produce({{"kind", kind}});
        }
        conf.set("group", "cxx-poll").set("consumer", "poller-1");
        conf.set("start", "head").set("block_ms", "100");
        echomq::consumer consumer(conf); /* no handler: pull mode */

        std::atomic<int> acked{0}, retried{0}, dead{0}, failed{0};
        std::vector<std::thread> settlers;
        std::string first_id;
        auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::seconds(30);
        while (acked + dead < 6 && failed == 0 &&
               std::chrono::steady_clock::now() < deadline) {
            std::vector<echomq::polled> got = consumer.poll(4, 200);
            if (got.empty())
                continue;
            if (first_id.empty())
                first_id = got[0].id();
            /* Any thread may settle: this batch goes to a thread of its
             * own, with the entries it owns. */
            settlers.emplace_back([&, batch = std::move(got)] {
                for (const echomq::polled &e : batch) {
                    try {
                        std::string_view kind = e.field("kind");
                        if (kind == "bad") {
                            consumer.dead(e, "bad job");
                            dead++;
                        } else if (kind == "flaky" && e->deliveries == 1) {
                            consumer.retry(e, 50, "flaky the first time");
                            retried++;
                        } else {
                            consumer.ack(e);
                            acked++;
                        }
                    } catch (const echomq::error &x) {
                        std::fprintf(stderr, "cxx_poll: settling %s: %s\n",
                                     e->id, x.what());
                        failed++;
                    }
                }
            });
        }
        for (std::thread &t : settlers)
            t.join();

        /* Settled already: the consumer says so. */
        emq_entry again{};
        again.id = first_id.c_str();
        bool refused = false;
        try {
            consumer.ack(again);
        } catch (const echomq::error &x) {
            refused = x.code() == EMQ_EINVAL;
        }
        consumer.close(5000);

        echomq::admin admin(conf);
        echomq::dead_letters letters = admin.dead_list();
        std::string reason =
            letters.size() == 1 && letters[0].reason ? letters[0].reason : "";
        echomq::queue_info info = admin.describe();
        uint64_t pending = info->ngroups == 1 ? info->groups[0].pending : 99;
        if (acked != 5 || retried != 1 || dead != 1 || failed != 0 ||
            !refused || reason != "bad job" || pending != 0) {
            std::fprintf(stderr,
                         "cxx_poll: acked %d (want 5), retried %d (1), dead "
                         "%d (1), failed %d (0), second ack refused %d (1), "
                         "reason '%s', pending %llu (0)\n",
                         acked.load(), retried.load(), dead.load(),
                         failed.load(), refused, reason.c_str(),
                         (unsigned long long)pending);
            return 1;
        }
        std::printf("cxx_poll: 5 acked (one after a retry), 1 dead letter "
                    "(\"%s\"), settled from %zu threads\n",
                    reason.c_str(), settlers.size());
        return 0;
    } catch (const echomq::error &e) {
        std::fprintf(stderr, "cxx_poll: %s (%s)\n", e.what(),
                     emq_status_name(e.code()));
        return 1;
    }
}
