/* SPDX-License-Identifier: BSD-3-Clause */
/* echomq.hpp: a thin C++17 layer over echomq.h.
 *
 * RAII handles (echomq::conf, producer, consumer, admin: movable, not
 * copyable, freed by their destructors), failures as echomq::error (the
 * library's status, retriable flag and message), and lambdas as handlers.
 * Header only: nothing here is compiled into libechomq, and nothing of C++
 * crosses into it. An exception a handler throws is caught at the
 * boundary and becomes EMQ_RETRY with its what() as the reason (an
 * exception of another type: "unknown exception"), so the entry is
 * delivered again, and dead-lettered after max_deliveries with that
 * reason; it never unwinds through the library's frames.
 *
 * Threads: as the C handles (echomq.h): a producer from any thread, a
 * consumer run on one thread and stopped from any, an admin one thread at
 * a time.
 */
#ifndef ECHOMQ_HPP
#define ECHOMQ_HPP

#include "echomq.h"

#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace echomq {

/* A failed call: the library's status, whether the same call may succeed
 * later, and its one-sentence message. */
class error : public std::runtime_error {
  public:
    explicit error(const emq_error &e)
        : std::runtime_error(e.message), code_(e.code),
          retriable_(e.retriable != 0), reply_code_(e.reply_code) {}
    emq_status code() const noexcept { return code_; }
    bool retriable() const noexcept { return retriable_; }
    /* The server's error code ("NOGROUP", ...) when an error reply caused
     * it; "" otherwise. */
    const std::string &reply_code() const noexcept { return reply_code_; }

  private:
    emq_status code_;
    bool retriable_;
    std::string reply_code_;
};

namespace detail {
inline void check(emq_status st, const emq_error &e) {
    if (st != EMQ_OK)
        throw error(e);
}
} // namespace detail

/* A field of an entry: name and value, binary-safe views. */
struct field {
    std::string_view name;
    std::string_view value;
};

/* A configuration (emq_conf_t): set properties by name (docs/
 * CONFIGURATION.md); a bad name or value throws, naming it. */
class conf {
  public:
    conf() : c_(emq_conf_new()) {
        if (c_ == nullptr)
            throw std::bad_alloc();
    }
    ~conf() { emq_conf_destroy(c_); }
    conf(conf &&o) noexcept : c_(std::exchange(o.c_, nullptr)) {}
    conf &operator=(conf &&o) noexcept {
        std::swap(c_, o.c_);
        return *this;
    }
    conf(const conf &) = delete;
    conf &operator=(const conf &) = delete;

    conf &set(const std::string &name, const std::string &value) {
        emq_error e;
        detail::check(emq_conf_set(c_, name.c_str(), value.c_str(), &e), e);
        return *this;
    }
    const emq_conf_t *get() const noexcept { return c_; }

  private:
    emq_conf_t *c_;
};

/* A producer (emq_producer_t). */
class producer {
  public:
    explicit producer(const conf &c) {
        emq_error e;
        detail::check(emq_producer_new(c.get(), &p_, &e), e);
    }
    ~producer() { emq_producer_destroy(p_); }
    producer(producer &&o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
    producer &operator=(producer &&o) noexcept {
        std::swap(p_, o.p_);
        return *this;
    }
    producer(const producer &) = delete;
    producer &operator=(const producer &) = delete;

    /* Adds one entry; returns its ID (emq_produce). */
    std::string produce(const std::vector<field> &fields) {
        return produce_keyed(nullptr, 0, fields);
    }
    /* Adds one entry with a message key (emq_produce_keyed). */
    std::string produce(std::string_view key,
                        const std::vector<field> &fields) {
        return produce_keyed(key.data(), key.size(), fields);
    }
    /* Waits until every asynchronous entry was called back. */
    void flush(int64_t timeout_ms = -1) {
        emq_error e;
        detail::check(emq_producer_flush(p_, timeout_ms, &e), e);
    }
    emq_producer_t *get() noexcept { return p_; }

  private:
    static std::vector<emq_field> c_fields(const std::vector<field> &f) {
        std::vector<emq_field> out;
        out.reserve(f.size());
        for (const field &x : f)
            out.push_back({x.name.data(), x.name.size(), x.value.data(),
                           x.value.size()});
        return out;
    }
    std::string produce_keyed(const char *key, size_t len,
                              const std::vector<field> &fields) {
        std::vector<emq_field> f = c_fields(fields);
        emq_id id;
        emq_error e;
        detail::check(emq_produce_keyed(p_, key, len, f.data(), f.size(), &id,
                                        &e),
                      e);
        return id.str;
    }
    emq_producer_t *p_ = nullptr;
};

/* What a handler answers, and an entry as a handler sees it (valid during
 * the call). */
using verdict = emq_verdict;
using entry = emq_entry;

/* The value of field name of e ("" when absent). */
inline std::string_view field_of(const entry &e, std::string_view name) {
    for (size_t i = 0; i < e.nfields; i++)
        if (std::string_view(e.fields[i].name, e.fields[i].name_len) == name)
            return {e.fields[i].value, e.fields[i].value_len};
    return {};
}

/* A consumer (emq_consumer_t) calling a C++ handler. */
class consumer {
  public:
    using handler = std::function<verdict(const entry &)>;

    consumer(const conf &c, handler h)
        : h_(std::make_unique<handler>(std::move(h))) {
        emq_error e;
        detail::check(emq_consumer_new(c.get(), &consumer::call, h_.get(),
                                       &c_, &e),
                      e);
    }
    ~consumer() { emq_consumer_destroy(c_); }
    consumer(consumer &&o) noexcept
        : h_(std::move(o.h_)), c_(std::exchange(o.c_, nullptr)) {}
    consumer &operator=(consumer &&o) noexcept {
        std::swap(h_, o.h_);
        std::swap(c_, o.c_);
        return *this;
    }
    consumer(const consumer &) = delete;
    consumer &operator=(const consumer &) = delete;

    /* Runs the handler until stop() (returns) or a fatal error (throws). */
    void run() {
        emq_error e;
        detail::check(emq_consumer_run(c_, &e), e);
    }
    /* Asks run() to return; any thread, async-signal-safe. */
    void stop() noexcept { emq_consumer_stop(c_); }
    emq_consumer_stats stats() const {
        emq_consumer_stats s;
        emq_consumer_stats_get(c_, &s);
        return s;
    }
    emq_consumer_t *get() noexcept { return c_; }

  private:
    /* The boundary: no exception leaves this function. */
    static emq_verdict call(void *opaque, const emq_entry *e, char *reason,
                            size_t reason_size) noexcept {
        const char *why = "unknown exception";
        std::string what;
        try {
            return (*static_cast<handler *>(opaque))(*e);
        } catch (const std::exception &x) {
            what = x.what();
            why = what.c_str();
        } catch (...) {
        }
        if (reason_size > 0) {
            std::strncpy(reason, why, reason_size - 1);
            reason[reason_size - 1] = '\0';
        }
        return EMQ_RETRY;
    }
    std::unique_ptr<handler> h_; /* stable address: the C side's opaque */
    emq_consumer_t *c_ = nullptr;
};

/* An admin handle (emq_admin_t) with the verbs an operator script wants;
 * get() reaches the rest of the C API. */
class admin {
  public:
    explicit admin(const conf &c) {
        emq_error e;
        detail::check(emq_admin_new(c.get(), &a_, &e), e);
    }
    ~admin() { emq_admin_destroy(a_); }
    admin(admin &&o) noexcept : a_(std::exchange(o.a_, nullptr)) {}
    admin &operator=(admin &&o) noexcept {
        std::swap(a_, o.a_);
        return *this;
    }
    admin(const admin &) = delete;
    admin &operator=(const admin &) = delete;

    /* The queue's description as JSON (emq_queue_info_json). */
    std::string describe_json() {
        emq_queue_info *info = nullptr;
        emq_error e;
        detail::check(emq_admin_describe(a_, &info, &e), e);
        char probe[1];
        size_t need = emq_queue_info_json(info, probe, sizeof probe);
        std::string out(need, '\0');
        emq_queue_info_json(info, out.data(), need + 1);
        emq_queue_info_free(info);
        return out;
    }
    /* Creates group at start; false when it existed already. */
    bool group_create(const std::string &group, const std::string &start) {
        int created = 0;
        emq_error e;
        detail::check(emq_admin_group_create(a_, group.c_str(), start.c_str(),
                                             &created, &e),
                      e);
        return created != 0;
    }
    /* Puts every dead letter back on the queue; how many moved. */
    uint64_t dead_requeue_all() {
        uint64_t moved = 0;
        emq_error e;
        detail::check(emq_admin_dead_requeue(a_, nullptr, 0, &moved, &e), e);
        return moved;
    }
    emq_admin_t *get() noexcept { return a_; }

  private:
    emq_admin_t *a_ = nullptr;
};

} // namespace echomq

#endif /* ECHOMQ_HPP */
