/* SPDX-License-Identifier: BSD-3-Clause */
/* cxx_worker.cpp: echomq from C++ (include/echomq.hpp), end to end.
 *
 *   cxx_worker URL QUEUE
 *
 * Produces three entries, one of them "boom", then consumes them with a
 * lambda: "boom" throws, which the wrapper turns into a retry carrying the
 * exception's what() (max_deliveries 1: straight to the dead letters), the
 * others are acknowledged. Then it checks with the admin verbs that one
 * dead letter holds that reason and nothing is pending, and exits 0, or
 * prints what differs and exits 1. CI builds it with g++ against the
 * installed library and runs it on a private redis-server.
 */
#include "echomq.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

int main(int argc, char **argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: cxx_worker URL QUEUE\n");
        return 2;
    }
    try {
        echomq::conf conf;
        conf.set("url", argv[1]).set("queue", argv[2]);
        echomq::producer producer(conf);
        for (const char *job : {"one", "boom", "two"})
            producer.produce({{"job", job}});

        conf.set("group", "cxx").set("consumer", "cxx-1").set("start", "head");
        conf.set("max_deliveries", "1").set("block_ms", "100");
        std::atomic<int> handled{0};
        echomq::consumer consumer(conf, [&](const echomq::entry &e) {
            if (echomq::field_of(e, "job") == "boom")
                throw std::runtime_error("the boom job always fails");
            handled++;
            return EMQ_ACK;
        });
        /* A second thread stops the consumer once the work is done, or
         * after 30 s (a loaded machine or valgrind may need many). */
        std::thread stopper([&] {
            auto deadline = std::chrono::steady_clock::now() +
                            std::chrono::seconds(30);
            while (std::chrono::steady_clock::now() < deadline) {
                emq_consumer_stats s = consumer.stats();
                if (s.acked == 2 && s.dead_lettered == 1)
                    break;
                std::this_thread::sleep_for(std::chrono::milliseconds(25));
            }
            consumer.stop();
        });
        consumer.run();
        stopper.join();

        echomq::admin admin(conf);
        echomq::dead_letters letters = admin.dead_list(10);
        size_t n = letters.size();
        std::string reason = n == 1 && letters[0].reason ? letters[0].reason
                                                         : "";
        std::string info = admin.describe_json();
        if (handled != 2 || n != 1 || reason != "the boom job always fails" ||
            info.find("\"pending\":0") == std::string::npos) {
            std::fprintf(stderr,
                         "cxx_worker: handled %d, %zu dead letter(s), reason "
                         "'%s'; %s\n",
                         handled.load(), n, reason.c_str(), info.c_str());
            return 1;
        }
        std::printf("cxx_worker: 2 handled, 1 dead letter (\"%s\")\n",
                    reason.c_str());
        return 0;
    } catch (const echomq::error &e) {
        std::fprintf(stderr, "cxx_worker: %s (%s)\n", e.what(),
                     emq_status_name(e.code()));
        return 1;
    }
}
