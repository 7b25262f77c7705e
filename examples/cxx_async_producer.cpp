/* SPDX-License-Identifier: BSD-3-Clause */
/* cxx_async_producer.cpp: asynchronous producing from C++ (echomq.hpp),
 * with a delivery callback per entry.
 *
 *   cxx_async_producer URL QUEUE
 *
 * Queues 200 entries with produce_async (every fourth with a message key)
 * from two threads; the callbacks, on the producer's delivery thread,
 * record each outcome; flush() waits for all of them. Then a producer with
 * producer.delivery poll queues 10 more, whose callbacks run inside
 * poll() on this thread. Checks that all 210 were added, each ID once,
 * that an empty callback is refused (EMQ_EINVAL), and the stream's length.
 * Exits 0, or prints what differs and exits 1. CI builds it against the
 * installed library and runs it on a private redis-server.
 */
#include "echomq.hpp"

#include <chrono>
#include <cstdio>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>

int main(int argc, char **argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: cxx_async_producer URL QUEUE\n");
        return 2;
    }
    try {
        echomq::conf conf;
        conf.set("url", argv[1]).set("queue", argv[2]);
        conf.set("producer.linger_ms", "5");

        std::mutex mu; /* callbacks of one producer run one at a time, but
                          the checks read from this thread */
        std::set<std::string> ids;
        int not_added = 0;
        auto record = [&](const echomq::delivery &d) {
            std::lock_guard<std::mutex> lock(mu);
            if (d.status == EMQ_OK)
                ids.insert(d.id);
            else
                not_added++;
        };
        {
            echomq::producer producer(conf);
            auto queue_some = [&](int from) {
                for (int i = from; i < from + 100; i++) {
                    std::string n = std::to_string(i);
                    if (i % 4 == 0)
                        producer.produce_async("customer-" + n, {{"n", n}},
                                               record);
                    else
                        producer.produce_async({{"n", n}}, record);
                }
            };
            std::thread other(queue_some, 100);
            queue_some(0);
            other.join();
            producer.flush(30000);
            if (producer.outstanding() != 0)
                throw std::runtime_error("entries outstanding after flush");

            bool refused = false;
            try {
                producer.produce_async({{"n", "x"}}, nullptr);
            } catch (const echomq::error &x) {
                refused = x.code() == EMQ_EINVAL;
            }
            if (!refused)
                throw std::runtime_error("an empty callback was accepted");
        }

        /* Delivery poll: the callbacks run inside poll() on this thread. */
        conf.set("producer.delivery", "poll");
        echomq::producer polled(conf);
        std::thread::id here = std::this_thread::get_id();
        int ran_here = 0;
        for (int i = 0; i < 10; i++)
            polled.produce_async({{"n", std::to_string(200 + i)}},
                                 [&](const echomq::delivery &d) {
                                     if (std::this_thread::get_id() == here)
                                         ran_here++;
                                     record(d);
                                 });
        auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::seconds(30);
        while (ran_here < 10 && std::chrono::steady_clock::now() < deadline)
            polled.poll(100);

        echomq::admin admin(conf);
        uint64_t length = admin.describe()->length;
        std::lock_guard<std::mutex> lock(mu);
        if (ids.size() != 210 || not_added != 0 || ran_here != 10 ||
            length != 210) {
            std::fprintf(stderr,
                         "cxx_async_producer: %zu distinct IDs (want 210), "
                         "%d not added (0), %d polled callbacks on this "
                         "thread (10), stream length %llu (210)\n",
                         ids.size(), not_added, ran_here,
                         (unsigned long long)length);
            return 1;
        }
        std::printf("cxx_async_producer: 210 entries added asynchronously, "
                    "each called back once\n");
        return 0;
    } catch (const echomq::error &e) {
        std::fprintf(stderr, "cxx_async_producer: %s (%s)\n", e.what(),
                     emq_status_name(e.code()));
        return 1;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "cxx_async_producer: %s\n", e.what());
        return 1;
    }
}
