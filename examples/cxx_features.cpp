/* SPDX-License-Identifier: BSD-3-Clause */
/* cxx_features.cpp: the work-queue features from C++ (echomq.hpp):
 * priorities, a delay, an idempotency key, a cancellation, group limits,
 * and a handler that dead-letters with its own reason.
 *
 *   cxx_features URL QUEUE
 *
 * Produces jobs of priorities 9, 5 and 1, and a batch of two more (2 and
 * 7) with options per entry; "invoice" twice with the idempotency key
 * "invoice-42" (the second call answers the first handle: one job);
 * "poison"; "later", delayed 300 ms; and "cancelled", delayed a minute
 * and then cancelled (admin::cancel). It limits the group "workers" to
 * 100 entries a second and 2 in flight (admin::group_limits), checks what
 * waits (admin::priorities, admin::delayed), then runs a consumer, one
 * entry at a time, whose handler answers echomq::dead("...") for
 * "poison" and EMQ_ACK for the others. Checks that the prioritized jobs
 * came most urgent first, "invoice" once, "later" after its delay,
 * "cancelled" never, and that the one dead letter carries the handler's
 * reason. Exits 0, or prints the first that differs and exits 1. CI
 * builds it against the installed library and runs it on a private
 * redis-server.
 */
#include "echomq.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

/* Throws what differs: main prints it. */
void expect(bool ok, const std::string &what) {
    if (!ok)
        throw std::runtime_error(what);
}

/* Where job came in order; order.size() when it never came. */
size_t position(const std::vector<std::string> &order, const char *job) {
    return static_cast<size_t>(std::find(order.begin(), order.end(), job) -
                               order.begin());
}

} // namespace

int main(int argc, char **argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: cxx_features URL QUEUE\n");
        return 2;
    }
    try {
        echomq::conf conf;
        conf.set("url", argv[1]).set("queue", argv[2]);

        std::string later;
        int64_t produced_at = 0;
        {
            echomq::producer producer(conf);
            for (int level : {9, 5, 1}) {
                echomq::produce_opts o;
                o.priority = level;
                std::string job = level == 9   ? "report-9"
                                  : level == 5 ? "email-5"
                                               : "refund-1";
                producer.produce({{"job", job}}, o);
            }
            /* A batch with options per entry. */
            std::vector<echomq::message> batch(2);
            batch[0].fields = {{"job", "batch-2"}};
            batch[1].fields = {{"job", "batch-7"}};
            std::vector<echomq::produce_opts> opts(2);
            opts[0].priority = 2;
            opts[1].priority = 7;
            std::vector<std::string> ids = producer.produce_batch(batch, opts);
            expect(ids.size() == 2 && !ids[0].empty() && !ids[1].empty(),
                   "produce_batch: 2 handles");

            echomq::produce_opts once;
            once.dedup_key = "invoice-42";
            std::string first = producer.produce({{"job", "invoice"}}, once);
            std::string again = producer.produce({{"job", "invoice"}}, once);
            expect(first == again, "dedup: the second call answers the "
                                   "first handle (" +
                                       first + ", " + again + ")");
            producer.produce({{"job", "poison"}});

            echomq::produce_opts soon;
            soon.delay_ms = 300;
            produced_at = echomq::clock_ms();
            std::string delayed = producer.produce({{"job", "later"}}, soon);
            expect(delayed.rfind("delayed-", 0) == 0,
                   "a delayed entry's ID is its handle: " + delayed);
            echomq::produce_opts hour;
            hour.delay_ms = 60000;
            later = producer.produce({{"job", "cancelled"}}, hour);
        }

        echomq::admin admin(conf);
        std::vector<emq_cancel_outcome> cancelled = admin.cancel({later});
        expect(cancelled.size() == 1 && cancelled[0] == EMQ_CANCEL_REMOVED,
               "cancel: the delayed entry removed");
        emq_group_limits limits =
            admin.group_limits("workers", emq_group_limits{100, 2});
        expect(limits.rate == 100 && limits.max_in_flight == 2,
               "group_limits: 100 a second, 2 in flight");
        expect(admin.group_limits("workers").rate == 100,
               "group_limits read back");
        std::optional<emq_priority_info> prio = admin.priorities();
        expect(prio.has_value() && prio->held_at[1] == 1 &&
                   prio->held_at[9] == 1,
               "priorities: one held at level 1 and one at 9");
        emq_delayed_info delayed = admin.delayed();
        expect(delayed.waiting == 1, "delayed: only \"later\" waits (" +
                                         std::to_string(delayed.waiting) + ")");

        /* One entry at a time, so the order shows the priorities. */
        conf.set("group", "workers").set("consumer", "features-1");
        conf.set("start", "head").set("block_ms", "100");
        conf.set("max_in_flight", "1");
        std::vector<std::string> order;
        int64_t later_at = 0;
        echomq::consumer consumer(
            conf, [&](const echomq::entry &e) -> echomq::outcome {
                std::string job(echomq::field_of(e, "job"));
                order.push_back(job);
                if (job == "later")
                    later_at = echomq::clock_ms();
                if (job == "poison")
                    return echomq::dead("poison: cannot be parsed");
                return EMQ_ACK;
            });
        /* Stops the consumer once all came (7 acknowledged, 1 dead), or
         * after 30 s (a loaded machine or valgrind may need many). */
        std::thread stopper([&] {
            auto deadline = std::chrono::steady_clock::now() +
                            std::chrono::seconds(30);
            while (std::chrono::steady_clock::now() < deadline) {
                emq_consumer_stats s = consumer.stats();
                if (s.acked == 7 && s.dead_lettered == 1)
                    break;
                std::this_thread::sleep_for(std::chrono::milliseconds(25));
            }
            consumer.stop();
        });
        consumer.run();
        stopper.join();

        std::string got;
        for (const std::string &job : order)
            got += " " + job;
        expect(order.size() == 8, "8 jobs handled:" + got);
        expect(position(order, "refund-1") < position(order, "batch-2") &&
                   position(order, "batch-2") < position(order, "email-5") &&
                   position(order, "email-5") < position(order, "batch-7") &&
                   position(order, "batch-7") < position(order, "report-9"),
               "most urgent first:" + got);
        expect(std::count(order.begin(), order.end(), "invoice") == 1,
               "invoice once:" + got);
        expect(position(order, "cancelled") == order.size(),
               "cancelled never:" + got);
        expect(later_at - produced_at >= 300, "later after its delay");

        echomq::dead_letters letters = admin.dead_list();
        expect(letters.size() == 1 && letters[0].reason != nullptr &&
                   std::string(letters[0].reason) == "poison: cannot be parsed",
               "one dead letter with the handler's reason");

        std::printf("cxx_features: handled%s; cancelled 1, dead-lettered "
                    "\"%s\"\n",
                    got.c_str(), letters[0].reason);
        return 0;
    } catch (const echomq::error &e) {
        std::fprintf(stderr, "cxx_features: %s (%s)\n", e.what(),
                     echomq::status_name(e.code()));
        return 1;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "cxx_features: %s\n", e.what());
        return 1;
    }
}
