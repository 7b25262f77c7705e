/* SPDX-License-Identifier: BSD-3-Clause */
/* cxx_batch.cpp: a batch handler from C++ (echomq.hpp).
 *
 *   cxx_batch URL QUEUE
 *
 * Produces 20 entries n = 0..19 and consumes them with a batch handler
 * (batch.max 8) that adds up n as a bulk insert would take a batch. Entry
 * 13 is poison: dead-lettered with a reason. Entry 7 is flaky: on its
 * first delivery the handler decides every other entry of its batch, then
 * throws; the wrapper retries what was left undecided (entry 7 alone)
 * with the exception's what() as reason, and its second delivery is
 * acknowledged. Checks the sum, that each entry was acknowledged once, the
 * dead letter's reason and the counters. Exits 0, or prints what differs
 * and exits 1. CI builds it against the installed library and runs it on a
 * private redis-server.
 */
#include "echomq.hpp"

#include <chrono>
#include <cstdio>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>

int main(int argc, char **argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: cxx_batch URL QUEUE\n");
        return 2;
    }
    try {
        echomq::conf conf;
        conf.set("url", argv[1]).set("queue", argv[2]);
        {
            echomq::producer producer(conf);
            for (int n = 0; n < 20; n++)
                producer.produce({{"n", std::to_string(n)}});
        }
        conf.set("group", "cxx-batch").set("consumer", "batcher-1");
        conf.set("start", "head").set("block_ms", "100");
        conf.set("batch.max", "8").set("retry.backoff_ms", "100");

        /* The handler runs on run()'s thread only: no lock needed. */
        long sum = 0;
        size_t calls = 0, flaky_throws = 0;
        std::set<int> acked;
        echomq::consumer consumer(conf, [&](echomq::batch &b) {
            calls++;
            bool throw_after = false;
            for (size_t i = 0; i < b.size(); i++) {
                int n = std::stoi(std::string(echomq::field_of(b[i], "n")));
                if (n == 13) {
                    b.dead(i, "poison entry 13");
                } else if (n == 7 && b[i].deliveries == 1) {
                    throw_after = true; /* left undecided */
                } else {
                    b.ack(i);
                    sum += n;
                    acked.insert(n);
                }
            }
            if (throw_after) {
                flaky_throws++;
                throw std::runtime_error("entry 7 is flaky the first time");
            }
        });
        /* A second thread stops the consumer once the work is done, or
         * after 30 s. */
        std::thread stopper([&] {
            auto deadline = std::chrono::steady_clock::now() +
                            std::chrono::seconds(30);
            while (std::chrono::steady_clock::now() < deadline) {
                emq_consumer_stats s = consumer.stats();
                if (s.acked == 19 && s.dead_lettered == 1)
                    break;
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
            }
            consumer.stop();
        });
        consumer.run();
        stopper.join();

        emq_consumer_stats s = consumer.stats();
        echomq::admin admin(conf);
        echomq::dead_letters letters = admin.dead_list();
        std::string reason =
            letters.size() == 1 && letters[0].reason ? letters[0].reason : "";
        long want = 19 * 20 / 2 - 13;
        if (sum != want || acked.size() != 19 || flaky_throws != 1 ||
            s.retried != 1 || s.dead_lettered != 1 ||
            reason != "poison entry 13") {
            std::fprintf(stderr,
                         "cxx_batch: sum %ld (want %ld), %zu acked (19), "
                         "%zu throws (1), %llu retried (1), %llu dead (1), "
                         "reason '%s'; %s\n",
                         sum, want, acked.size(), flaky_throws,
                         (unsigned long long)s.retried,
                         (unsigned long long)s.dead_lettered, reason.c_str(),
                         consumer.stats_json().c_str());
            return 1;
        }
        std::printf("cxx_batch: 19 acked in %zu batch calls (sum %ld), 1 "
                    "retried after a throw, 1 dead letter (\"%s\")\n",
                    calls, sum, reason.c_str());
        return 0;
    } catch (const echomq::error &e) {
        std::fprintf(stderr, "cxx_batch: %s (%s)\n", e.what(),
                     emq_status_name(e.code()));
        return 1;
    }
}
