/* SPDX-License-Identifier: BSD-3-Clause */
/* echomq.hpp: a thin C++17 layer over echomq.h.
 *
 * RAII handles (echomq::conf, producer, consumer, admin: movable, not
 * copyable, freed by their destructors; a moved-from handle may only be
 * destroyed or assigned to), failures as echomq::error (the library's
 * status, retriable flag and message), and lambdas as handlers and
 * delivery callbacks. A call the library fails throws echomq::error
 * (EMQ_ENOMEM included; conf() throws std::bad_alloc), a bad index
 * std::out_of_range, and the C++ side's own allocations std::bad_alloc;
 * results come back as values. Header only: nothing here is compiled
 * into libechomq, and nothing of C++ crosses into it.
 *
 * What C++ code gives the library is called behind a boundary that no
 * exception crosses: an exception a handler throws becomes EMQ_RETRY
 * with its what() as the reason (an exception of another type: "unknown
 * exception"), so the entry is delivered again, and dead-lettered after
 * max_deliveries with that reason; a batch handler's exception does the
 * same for every entry it had not decided yet. A delivery callback must
 * not throw (it is noexcept: an exception ends the program, as from a
 * destructor).
 *
 * Ownership: an entry a handler sees (echomq::entry) is borrowed for the
 * call; an entry poll hands out (echomq::polled) is the caller's until
 * its destructor, also after the consumer is gone. Strings and vectors
 * returned are copies the caller owns.
 *
 * Threads: as the C handles (echomq.h): a producer from any thread; a
 * consumer run on one thread, or polled from any number, its pull-mode
 * entries settled from any thread, stopped from any; an admin one thread
 * at a time. Each method below says where it differs.
 */
#ifndef ECHOMQ_HPP
#define ECHOMQ_HPP

#include "echomq.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <new>
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
          retriable_(e.retriable != 0), fatal_(e.fatal != 0),
          reply_code_(e.reply_code) {}
    emq_status code() const noexcept { return code_; }
    bool retriable() const noexcept { return retriable_; }
    /* The handle's work ended for good (emq_error.fatal). */
    bool fatal() const noexcept { return fatal_; }
    /* The server's error code ("NOGROUP", ...) when an error reply caused
     * it; "" otherwise. */
    const std::string &reply_code() const noexcept { return reply_code_; }

  private:
    emq_status code_;
    bool retriable_;
    bool fatal_;
    std::string reply_code_;
};

namespace detail {
inline void check(emq_status st, const emq_error &e) {
    if (st != EMQ_OK)
        throw error(e);
}
/* The text of a C call with snprintf semantics (write(buf, size) returns
 * the full length): probed, then written. */
template <typename Write> std::string snprintf_string(Write write) {
    char probe[1];
    size_t need = write(probe, sizeof probe);
    std::string out(need, '\0');
    write(out.data(), need + 1);
    return out;
}
/* Copies at most size - 1 bytes of text into buf, NUL-terminated. */
inline void copy_reason(const char *text, char *buf, size_t size) {
    if (size == 0)
        return;
    std::strncpy(buf, text, size - 1);
    buf[size - 1] = '\0';
}
/* Runs f; what it throws becomes EMQ_RETRY with the exception's what()
 * (or "unknown exception") in reason. */
template <typename F>
emq_verdict guarded(F &&f, char *reason, size_t reason_size) noexcept {
    try {
        return f();
    } catch (const std::exception &x) {
        copy_reason(x.what(), reason, reason_size);
    } catch (...) {
        copy_reason("unknown exception", reason, reason_size);
    }
    return EMQ_RETRY;
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

namespace detail {
/* An error raised by this header itself (a misuse the C API cannot
 * see): code and message as the library would give them. */
inline error make_error(emq_status code, const std::string &message) {
    emq_error e;
    std::memset(&e, 0, sizeof e);
    e.code = code;
    copy_reason(message.c_str(), e.message, sizeof e.message);
    return error(e);
}
/* The C view of fields: borrowed from f for the call. */
inline std::vector<emq_field> c_fields(const std::vector<field> &f) {
    std::vector<emq_field> out;
    out.reserve(f.size());
    for (const field &x : f)
        out.push_back(
            {x.name.data(), x.name.size(), x.value.data(), x.value.size()});
    return out;
}
} // namespace detail

/* The outcome of one asynchronous entry (emq_delivery): borrowed for the
 * callback only; copy id and error->message to keep them. */
using delivery = emq_delivery;

/* A producer (emq_producer_t). Any thread, every method but the
 * destructor and move assignment. */
class producer {
  public:
    /* Called once per asynchronous entry with its outcome, on a thread of
     * the producer (producer.delivery thread) or inside poll() and
     * flush() (producer.delivery poll). Must not throw (see the top of
     * this file); may call produce_async, not flush. */
    using delivery_fn = std::function<void(const delivery &)>;

    explicit producer(const conf &c) {
        emq_error e;
        detail::check(emq_producer_new(c.get(), &p_, &e), e);
    }
    /* Entries not sent yet are called back EMQ_ECLOSED (flush() first to
     * send them); every callback still owed runs before it returns. */
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
    /* Queues one entry (fields copied) and returns at once; cb (moved in,
     * freed after its one call) gets the outcome (emq_produce_async).
     * Throws EMQ_ELIMIT when the producer's queue is full, EMQ_EINVAL for
     * no fields or an empty cb: then cb is never called. */
    void produce_async(const std::vector<field> &fields, delivery_fn cb) {
        produce_async_keyed(nullptr, 0, fields, std::move(cb));
    }
    /* produce_async with a message key (emq_produce_async_keyed). */
    void produce_async(std::string_view key, const std::vector<field> &fields,
                       delivery_fn cb) {
        produce_async_keyed(key.data(), key.size(), fields, std::move(cb));
    }
    /* Runs the delivery callbacks that are due (producer.delivery poll) on
     * this thread, waiting up to timeout_ms for the first (0: never; < 0:
     * until one); returns how many ran (emq_producer_poll). */
    size_t poll(int64_t timeout_ms = 0) {
        return emq_producer_poll(p_, timeout_ms);
    }
    /* Waits until every asynchronous entry was called back; throws
     * EMQ_ETIMEDOUT when timeout_ms (< 0: no bound) ran out first. */
    void flush(int64_t timeout_ms = -1) {
        emq_error e;
        detail::check(emq_producer_flush(p_, timeout_ms, &e), e);
    }
    /* Asynchronous entries not yet called back. */
    size_t outstanding() { return emq_producer_outstanding(p_); }
    emq_producer_t *get() noexcept { return p_; }

  private:
    std::string produce_keyed(const char *key, size_t len,
                              const std::vector<field> &fields) {
        std::vector<emq_field> f = detail::c_fields(fields);
        emq_id id;
        emq_error e;
        detail::check(
            emq_produce_keyed(p_, key, len, f.data(), f.size(), &id, &e), e);
        return id.str;
    }
    void produce_async_keyed(const char *key, size_t len,
                             const std::vector<field> &fields, delivery_fn cb) {
        if (!cb)
            throw detail::make_error(EMQ_EINVAL,
                                     "produce_async needs a delivery "
                                     "callback: an empty one was given");
        std::vector<emq_field> f = detail::c_fields(fields);
        auto owned = std::make_unique<delivery_fn>(std::move(cb));
        emq_error e;
        detail::check(emq_produce_async_keyed(p_, key, len, f.data(), f.size(),
                                              &producer::delivered, owned.get(),
                                              &e),
                      e);
        (void)owned.release(); /* delivered() frees it */
    }
    /* The boundary: the callback's one call, then its function freed. */
    static void delivered(void *opaque, const emq_delivery *d) noexcept {
        std::unique_ptr<delivery_fn> cb(static_cast<delivery_fn *>(opaque));
        (*cb)(*d);
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

/* An entry consumer::poll handed out: the caller's, with every pointer in
 * it, until the destructor (emq_entry_free), even after the consumer is
 * gone; movable to another thread, not copyable. Settle it with the
 * consumer's ack, retry or dead (it converts to const entry &). */
class polled {
  public:
    polled() noexcept = default;
    /* Takes ownership of e (from emq_consumer_poll or _step). */
    explicit polled(emq_entry *e) noexcept : e_(e) {}
    ~polled() { emq_entry_free(e_); }
    polled(polled &&o) noexcept : e_(std::exchange(o.e_, nullptr)) {}
    polled &operator=(polled &&o) noexcept {
        std::swap(e_, o.e_);
        return *this;
    }
    polled(const polled &) = delete;
    polled &operator=(const polled &) = delete;

    const entry &operator*() const noexcept { return *e_; }
    const entry *operator->() const noexcept { return e_; }
    operator const entry &() const noexcept { return *e_; }
    std::string_view id() const noexcept { return e_->id; }
    /* The value of field name ("" when absent). */
    std::string_view field(std::string_view name) const {
        return field_of(*e_, name);
    }
    /* The entry as JSON (emq_entry_json). */
    std::string json() const {
        return detail::snprintf_string([this](char *buf, size_t size) {
            return emq_entry_json(e_, buf, size);
        });
    }

  private:
    emq_entry *e_ = nullptr;
};

/* One call of a batch handler: up to batch.max entries (borrowed for the
 * call) and a verdict for each, EMQ_ACK unless ack, retry or dead says
 * otherwise. Used on the handler's thread only. */
class batch {
  public:
    size_t size() const noexcept { return n_; }
    const entry &operator[](size_t i) const noexcept { return *entries_[i]; }
    /* Verdicts; i out of range throws std::out_of_range. A reason longer
     * than the outcome's room (255 bytes) is cut. */
    void ack(size_t i) { decide(i, EMQ_ACK, {}); }
    void retry(size_t i, std::string_view reason = {}) {
        decide(i, EMQ_RETRY, reason);
    }
    void dead(size_t i, std::string_view reason = {}) {
        decide(i, EMQ_DEAD, reason);
    }

  private:
    friend class consumer;
    batch(const emq_entry *const *entries, size_t n, emq_outcome *outcomes)
        : entries_(entries), n_(n), outcomes_(outcomes), decided_(n, false) {}
    void decide(size_t i, emq_verdict v, std::string_view reason) {
        if (i >= n_)
            throw std::out_of_range("echomq::batch: entry index out of range");
        emq_outcome &o = outcomes_[i];
        size_t len = std::min(reason.size(), sizeof o.reason - 1);
        if (len > 0) /* an empty view's data() may be NULL */
            std::memcpy(o.reason, reason.data(), len);
        o.reason[len] = '\0';
        o.verdict = v;
        decided_[i] = true;
    }
    /* The entries the handler decided nothing for, after it threw. */
    void fail_undecided(const char *why) noexcept {
        for (size_t i = 0; i < n_; i++)
            if (!decided_[i]) {
                outcomes_[i].verdict = EMQ_RETRY;
                detail::copy_reason(why, outcomes_[i].reason,
                                    sizeof outcomes_[i].reason);
            }
    }
    const emq_entry *const *entries_;
    size_t n_;
    emq_outcome *outcomes_;
    std::vector<bool> decided_;
};

/* A consumer (emq_consumer_t): run with a handler or a batch handler, or
 * pulled with poll (pull mode). */
class consumer {
  public:
    using handler = std::function<verdict(const entry &)>;
    /* Entries it leaves undecided are acknowledged; when it throws, they
     * are retried with the exception's what() as reason (those it decided
     * keep their verdict). */
    using batch_handler = std::function<void(batch &)>;

    /* Pull mode (a NULL handler): driven by poll, settled by ack, retry
     * and dead. */
    explicit consumer(const conf &c) {
        emq_error e;
        detail::check(emq_consumer_new(c.get(), nullptr, nullptr, &c_, &e), e);
    }
    consumer(const conf &c, handler h)
        : h_(std::make_unique<handler>(std::move(h))) {
        emq_error e;
        detail::check(
            emq_consumer_new(c.get(), &consumer::call, h_.get(), &c_, &e), e);
    }
    /* A batch handler (emq_consumer_new_batch): run() calls it with up to
     * batch.max entries at once. */
    consumer(const conf &c, batch_handler h)
        : bh_(std::make_unique<batch_handler>(std::move(h))) {
        emq_error e;
        detail::check(emq_consumer_new_batch(c.get(), &consumer::call_batch,
                                             bh_.get(), &c_, &e),
                      e);
    }
    /* Not while run() runs; pull mode is closed without waiting
     * (emq_consumer_destroy): polled entries stay valid, unsettled. */
    ~consumer() { emq_consumer_destroy(c_); }
    consumer(consumer &&o) noexcept
        : h_(std::move(o.h_)), bh_(std::move(o.bh_)),
          c_(std::exchange(o.c_, nullptr)) {}
    consumer &operator=(consumer &&o) noexcept {
        std::swap(h_, o.h_);
        std::swap(bh_, o.bh_);
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
    /* Asks run() to return, or ends pull mode's handouts (poll then
     * throws EMQ_ECLOSED); any thread, async-signal-safe. */
    void stop() noexcept { emq_consumer_stop(c_); }

    /* Pull mode (emq_consumer_poll): hands out up to max entries, waiting
     * up to timeout_ms for the first (0: never; < 0: until one comes or
     * the consumer stops); empty after the timeout. Any number of threads
     * at once; no entry is handed out twice. Throws EMQ_ECLOSED once
     * stopped (the normal end of a poll loop), or the fatal error that
     * ended the consumer. */
    std::vector<polled> poll(size_t max, int64_t timeout_ms = -1) {
        std::vector<emq_entry *> raw(max);
        size_t n = 0;
        emq_error e;
        emq_status st =
            emq_consumer_poll(c_, raw.data(), max, timeout_ms, &n, &e);
        std::vector<polled> out = adopt(raw, n);
        detail::check(st, e);
        return out;
    }
    /* Settle an entry poll handed out, from any thread, while the
     * consumer lives (also after stop(), until close()); only its id and
     * stream are read. Throw EMQ_EINVAL when not held here (settled
     * already, never handed out), EMQ_ELOST when a peer took it over or
     * the name's lease is not held now: then it stays pending and comes
     * again. ack: done (emq_consumer_ack). */
    void ack(const entry &en) {
        emq_error e;
        detail::check(emq_consumer_ack(c_, &en, &e), e);
    }
    /* Delivered again after delay_ms (< 0: the retry.backoff_ms
     * schedule), counting toward max_deliveries (emq_consumer_retry). */
    void retry(const entry &en, int64_t delay_ms = -1,
               const std::string &reason = {}) {
        emq_error e;
        detail::check(emq_consumer_retry(c_, &en, delay_ms, c_str(reason), &e),
                      e);
    }
    /* To the dead letters now (emq_consumer_dead). */
    void dead(const entry &en, const std::string &reason = {}) {
        emq_error e;
        detail::check(emq_consumer_dead(c_, &en, c_str(reason), &e), e);
    }
    /* Pull mode: nothing more read or handed out until resume(); any
     * thread. */
    void pause() noexcept { emq_consumer_pause(c_); }
    void resume() noexcept { emq_consumer_resume(c_); }
    /* Ends pull mode: stops, waits up to timeout_ms (< 0: without end)
     * for the entries out to be settled and sent, gives the name's lease
     * back (emq_consumer_close); throws the fatal error that ended the
     * consumer, if any. Not from a signal handler. */
    void close(int64_t timeout_ms = -1) {
        emq_error e;
        detail::check(emq_consumer_close(c_, timeout_ms, &e), e);
    }
    /* Event loops: a descriptor readable while a step has something to do
     * (owned by the consumer; starts pull mode), the non-blocking poll to
     * call on readiness, and the longest the loop may wait before calling
     * it (-1: only the descriptor matters). */
    int fd() {
        emq_error e;
        int fd = emq_consumer_fd(c_, &e);
        if (fd < 0)
            throw error(e);
        return fd;
    }
    std::vector<polled> step(size_t max) {
        std::vector<emq_entry *> raw(max);
        size_t n = 0;
        emq_error e;
        emq_status st = emq_consumer_step(c_, raw.data(), max, &n, &e);
        std::vector<polled> out = adopt(raw, n);
        detail::check(st, e);
        return out;
    }
    int64_t timeout_ms() noexcept { return emq_consumer_timeout_ms(c_); }

    /* Counters (emq_consumer_stats_get), and as JSON; any thread. */
    emq_consumer_stats stats() const {
        emq_consumer_stats s;
        emq_consumer_stats_get(c_, &s);
        return s;
    }
    std::string stats_json() const {
        return detail::snprintf_string([this](char *buf, size_t size) {
            return emq_consumer_stats_json(c_, buf, size);
        });
    }
    emq_consumer_t *get() noexcept { return c_; }

  private:
    static const char *c_str(const std::string &s) noexcept {
        return s.empty() ? nullptr : s.c_str();
    }
    /* Owns raw[0..n) whatever happens next. */
    static std::vector<polled> adopt(const std::vector<emq_entry *> &raw,
                                     size_t n) {
        std::vector<polled> out;
        try {
            out.reserve(n);
        } catch (...) {
            for (size_t i = 0; i < n; i++)
                emq_entry_free(raw[i]);
            throw;
        }
        for (size_t i = 0; i < n; i++)
            out.emplace_back(raw[i]);
        return out;
    }
    /* The boundaries: no exception leaves these functions. */
    static emq_verdict call(void *opaque, const emq_entry *e, char *reason,
                            size_t reason_size) noexcept {
        return detail::guarded(
            [&] { return (*static_cast<handler *>(opaque))(*e); }, reason,
            reason_size);
    }
    static void call_batch(void *opaque, const emq_entry *const *entries,
                           size_t n, emq_outcome *outcomes) noexcept {
        std::unique_ptr<batch> b;
        try {
            b.reset(new batch(entries, n, outcomes));
            (*static_cast<batch_handler *>(opaque))(*b);
        } catch (const std::exception &x) {
            fail(b.get(), outcomes, n, x.what());
        } catch (...) {
            fail(b.get(), outcomes, n, "unknown exception");
        }
    }
    /* What the batch handler did not decide, or all of it when the batch
     * could not even be made (b NULL), is retried with reason why. */
    static void fail(batch *b, emq_outcome *outcomes, size_t n,
                     const char *why) noexcept {
        if (b != nullptr) {
            b->fail_undecided(why);
            return;
        }
        for (size_t i = 0; i < n; i++) {
            outcomes[i].verdict = EMQ_RETRY;
            detail::copy_reason(why, outcomes[i].reason,
                                sizeof outcomes[i].reason);
        }
    }
    std::unique_ptr<handler> h_; /* stable addresses: the C side's opaque */
    std::unique_ptr<batch_handler> bh_;
    emq_consumer_t *c_ = nullptr;
};

/* What admin verbs return, owned: a queue's description and a reply of
 * admin_view::command, freed by their deleters. */
namespace detail {
struct queue_info_free {
    void operator()(emq_queue_info *i) const noexcept {
        emq_queue_info_free(i);
    }
};
struct reply_free {
    void operator()(emq_reply *r) const noexcept { emq_reply_free(r); }
};
} // namespace detail
using queue_info = std::unique_ptr<emq_queue_info, detail::queue_info_free>;
using reply = std::unique_ptr<emq_reply, detail::reply_free>;

/* A queue's description as JSON (emq_queue_info_json). */
inline std::string to_json(const emq_queue_info &info) {
    return detail::snprintf_string([&info](char *buf, size_t size) {
        return emq_queue_info_json(&info, buf, size);
    });
}
/* Pending entries as JSON lines (emq_pending_json). */
inline std::string to_json(const std::vector<emq_pending_entry> &pending) {
    return detail::snprintf_string([&pending](char *buf, size_t size) {
        return emq_pending_json(pending.data(), pending.size(), buf, size);
    });
}

/* Dead letters (emq_admin_dead_list), owned: one block, freed by the
 * destructor (emq_dead_letters_free); movable, not copyable. */
class dead_letters {
  public:
    dead_letters() noexcept = default;
    dead_letters(emq_dead_letter *l, size_t n) noexcept : l_(l), n_(n) {}
    ~dead_letters() { emq_dead_letters_free(l_, n_); }
    dead_letters(dead_letters &&o) noexcept
        : l_(std::exchange(o.l_, nullptr)), n_(std::exchange(o.n_, 0)) {}
    dead_letters &operator=(dead_letters &&o) noexcept {
        std::swap(l_, o.l_);
        std::swap(n_, o.n_);
        return *this;
    }
    dead_letters(const dead_letters &) = delete;
    dead_letters &operator=(const dead_letters &) = delete;

    size_t size() const noexcept { return n_; }
    bool empty() const noexcept { return n_ == 0; }
    const emq_dead_letter &operator[](size_t i) const noexcept { return l_[i]; }
    const emq_dead_letter *begin() const noexcept { return l_; }
    const emq_dead_letter *end() const noexcept { return l_ + n_; }
    /* As JSON lines (emq_dead_letters_json). */
    std::string json() const {
        return detail::snprintf_string([this](char *buf, size_t size) {
            return emq_dead_letters_json(l_, n_, buf, size);
        });
    }

  private:
    emq_dead_letter *l_ = nullptr;
    size_t n_ = 0;
};

/* The admin verbs over an emq_admin_t this object does not own: a
 * partition of a topic (admin::partition), or the admin itself. Valid
 * while its admin lives; one thread at a time, as that admin. Each verb
 * is the C one of the same name (echomq.h says what it does on a topic
 * handle) and throws its failures. */
class admin_view {
  public:
    explicit admin_view(emq_admin_t *a) noexcept : a_(a) {}

    /* The description (emq_admin_describe), owned. */
    queue_info describe() {
        emq_queue_info *info = nullptr;
        emq_error e;
        detail::check(emq_admin_describe(a_, &info, &e), e);
        return queue_info(info);
    }
    /* The queue's description as JSON (emq_queue_info_json). */
    std::string describe_json() { return to_json(*describe()); }
    /* At most max pending entries of group, oldest first, of consumer
     * only when not "", idle at least min_idle_ms. */
    std::vector<emq_pending_entry> pending(const std::string &group,
                                           const std::string &consumer = {},
                                           int64_t min_idle_ms = 0,
                                           size_t max = 1000) {
        emq_pending_entry *raw = nullptr;
        size_t n = 0;
        emq_error e;
        detail::check(
            emq_admin_pending(a_, group.c_str(),
                              consumer.empty() ? nullptr : consumer.c_str(),
                              min_idle_ms, max, &raw, &n, &e),
            e);
        std::unique_ptr<emq_pending_entry, void (*)(void *)> own(
            raw, emq_free_array);
        return std::vector<emq_pending_entry>(raw, raw + n);
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
    /* Moves group's cursor to "head", "tail", an ID or "@<unix-ms>";
     * returns how many stored entries follow it (handed out again). */
    uint64_t group_setid(const std::string &group, const std::string &to) {
        uint64_t redeliver = 0;
        emq_error e;
        detail::check(emq_admin_group_setid(a_, group.c_str(), to.c_str(),
                                            &redeliver, &e),
                      e);
        return redeliver;
    }
    /* Destroys group and its pending list; false when there was none. */
    bool group_destroy(const std::string &group) {
        int destroyed = 0;
        emq_error e;
        detail::check(
            emq_admin_group_destroy(a_, group.c_str(), &destroyed, &e), e);
        return destroyed != 0;
    }
    /* Removes group's consumers idle at least idle_ms, their entries
     * moved to another first. */
    emq_prune_result prune_consumers(const std::string &group,
                                     int64_t idle_ms) {
        emq_prune_result r;
        emq_error e;
        detail::check(
            emq_admin_prune_consumers(a_, group.c_str(), idle_ms, &r, &e), e);
        return r;
    }
    /* Deletes entries no group needs, as far as the bounds ask (-1: no
     * bound). */
    emq_trim_result trim_acked(int64_t maxlen = -1, int64_t max_age_ms = -1) {
        emq_trim_result r;
        emq_error e;
        detail::check(emq_admin_trim_acked(a_, maxlen, max_age_ms, &r, &e), e);
        return r;
    }
    /* At most max dead letters (0: all), oldest first; or those after
     * dead-letter ID after ("" : from the first). */
    dead_letters dead_list(size_t max = 0) { return dead_list_after({}, max); }
    dead_letters dead_list_after(const std::string &after, size_t max = 0) {
        emq_dead_letter *l = nullptr;
        size_t n = 0;
        emq_error e;
        detail::check(
            emq_admin_dead_list_after(
                a_, after.empty() ? nullptr : after.c_str(), max, &l, &n, &e),
            e);
        return dead_letters(l, n);
    }
    /* Puts the dead letters of these IDs back on the queue; returns how
     * many moved (an empty list moves none: dead_requeue_all moves all).
     * An ID not found throws EMQ_EINVAL after the others moved. */
    uint64_t dead_requeue(const std::vector<std::string> &ids) {
        if (ids.empty())
            return 0;
        std::vector<const char *> c_ids;
        c_ids.reserve(ids.size());
        for (const std::string &id : ids)
            c_ids.push_back(id.c_str());
        uint64_t moved = 0;
        emq_error e;
        detail::check(
            emq_admin_dead_requeue(a_, c_ids.data(), c_ids.size(), &moved, &e),
            e);
        return moved;
    }
    /* Puts every dead letter back on the queue; how many moved. */
    uint64_t dead_requeue_all() {
        uint64_t moved = 0;
        emq_error e;
        detail::check(emq_admin_dead_requeue(a_, nullptr, 0, &moved, &e), e);
        return moved;
    }
    /* Deletes every dead letter; how many there were. */
    uint64_t dead_purge() {
        uint64_t removed = 0;
        emq_error e;
        detail::check(emq_admin_dead_purge(a_, &removed, &e), e);
        return removed;
    }
    /* The partition count recorded for the queue (0: a plain queue). */
    int64_t topic_partitions() {
        int64_t p = 0;
        emq_error e;
        detail::check(emq_admin_topic_partitions(a_, &p, &e), e);
        return p;
    }
    /* Records the handle's partition count in each partition. */
    void topic_create() {
        emq_error e;
        detail::check(emq_admin_topic_create(a_, &e), e);
    }
    /* P for a topic handle, 0 for a queue's (no round trip). */
    int partition_count() const noexcept {
        return emq_admin_partition_count(a_);
    }
    /* Partition i of a topic handle; EMQ_EINVAL when this is not a topic
     * or i is out of range. */
    admin_view partition(int i) {
        emq_admin_t *p = emq_admin_partition(a_, i);
        if (p == nullptr)
            throw detail::make_error(EMQ_EINVAL,
                                     "no partition " + std::to_string(i) +
                                         " on a handle of " +
                                         std::to_string(partition_count()) +
                                         " partitions (0: not a topic)");
        return admin_view(p);
    }
    /* One command on the queue's node (emq_admin_command); an error reply
     * is a reply, not a throw. */
    reply command(const std::vector<std::string> &args) {
        std::vector<const char *> argv;
        std::vector<size_t> lens;
        argv.reserve(args.size());
        lens.reserve(args.size());
        for (const std::string &a : args) {
            argv.push_back(a.data());
            lens.push_back(a.size());
        }
        emq_reply *r = nullptr;
        emq_error e;
        detail::check(emq_admin_command(a_, static_cast<int>(args.size()),
                                        argv.data(), lens.data(), &r, &e),
                      e);
        return reply(r);
    }
    emq_admin_t *get() noexcept { return a_; }

  protected:
    emq_admin_t *a_ = nullptr;
};

/* An admin handle (emq_admin_t): owns its connection; every verb of
 * admin_view. One thread at a time. */
class admin : public admin_view {
  public:
    explicit admin(const conf &c) : admin_view(nullptr) {
        emq_error e;
        detail::check(emq_admin_new(c.get(), &a_, &e), e);
    }
    ~admin() { emq_admin_destroy(a_); }
    admin(admin &&o) noexcept : admin_view(std::exchange(o.a_, nullptr)) {}
    admin &operator=(admin &&o) noexcept {
        std::swap(a_, o.a_);
        return *this;
    }
    admin(const admin &) = delete;
    admin &operator=(const admin &) = delete;

    /* The queues on the server of conf (its queue unused) whose name
     * matches pattern ("": all), sorted; more than max (0: 10000) throws
     * EMQ_ELIMIT. Any thread: it opens its own connections. */
    static std::vector<std::string> scan_queues(const conf &c,
                                                const std::string &pattern = {},
                                                size_t max = 0) {
        char **names = nullptr;
        size_t n = 0;
        emq_error e;
        detail::check(emq_admin_scan_queues(
                          c.get(), pattern.empty() ? nullptr : pattern.c_str(),
                          max, &names, &n, &e),
                      e);
        std::vector<std::string> out;
        try {
            out.assign(names, names + n);
        } catch (...) {
            emq_queue_names_free(names, n);
            throw;
        }
        emq_queue_names_free(names, n);
        return out;
    }
};

} // namespace echomq

#endif /* ECHOMQ_HPP */
