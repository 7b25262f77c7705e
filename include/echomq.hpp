/* SPDX-License-Identifier: BSD-3-Clause */
/* echomq.hpp: a thin C++17 layer over echomq.h.
 *
 * Every function of echomq.h has its counterpart here (scripts/
 * check_hpp.sh fails when one has none): RAII handles (echomq::conf,
 * connection, producer, consumer, pool, admin: movable, not copyable,
 * freed by their destructors; a moved-from handle may only be destroyed
 * or assigned to), owners for what the library allocates (polled,
 * queue_info, reply, dead_letters, functions_states, parsed_fields),
 * failures as echomq::error (the library's status, retriable flag and
 * message), and lambdas as handlers, log, statistics and delivery
 * callbacks. A call the library fails throws echomq::error (EMQ_ENOMEM
 * included; conf() and conf::dup() throw std::bad_alloc), a bad index
 * std::out_of_range, and the C++ side's own allocations std::bad_alloc;
 * results come back as values. Header only: nothing here is compiled
 * into libechomq, and nothing of C++ crosses into it.
 *
 * What C++ code gives the library is called behind a boundary that no
 * exception crosses: a handler answers an echomq::outcome (a verdict,
 * and for a retry or a dead letter its reason: echomq::dead("bad
 * input")); an exception it throws becomes EMQ_RETRY with its what() as
 * the reason (an exception of another type: "unknown exception"), so
 * the entry is delivered again, and dead-lettered after max_deliveries
 * with that reason; a batch handler's exception does the same for every
 * entry it had not decided yet. A delivery callback must not throw (it
 * is noexcept: an exception ends the program, as from a destructor); an
 * exception of a log or statistics callback is dropped with its line.
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
#include <optional>
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

/* A batch that failed (producer::produce_batch): the error, and what is
 * known of each entry all the same: ids()[i] is entry i's ID (or handle),
 * "" when it was not added or its outcome is unknown; written() counts
 * those confirmed added. */
class batch_error : public error {
  public:
    batch_error(const emq_error &e, std::vector<std::string> ids,
                size_t written)
        : error(e), ids_(std::move(ids)), written_(written) {}
    const std::vector<std::string> &ids() const noexcept { return ids_; }
    size_t written() const noexcept { return written_; }

  private:
    std::vector<std::string> ids_;
    size_t written_;
};

/* The library: its version at run time (emq_version, emq_version_str),
 * its clock (emq_clock_ms), and the words of a status (emq_strerror,
 * emq_status_name). Static storage; any thread. */
inline unsigned version() noexcept { return emq_version(); }
inline const char *version_str() noexcept { return emq_version_str(); }
inline int64_t clock_ms() noexcept { return emq_clock_ms(); }
inline const char *status_text(emq_status st) noexcept {
    return emq_strerror(st);
}
inline const char *status_name(emq_status st) noexcept {
    return emq_status_name(st);
}

/* URL text with every part that may be a secret replaced by "***"
 * (emq_url_redact), whatever shape the text has. */
inline std::string url_redact(const std::string &text) {
    /* At most five secret spans, each "***": the output grows by 15. */
    std::string out(text.size() + 16, '\0');
    emq_url_redact(text.c_str(), out.data(), out.size());
    out.resize(std::strlen(out.c_str()));
    return out;
}
/* Overwrites in place, with '*', every character url_redact would hide
 * (emq_url_mask): for argv, whose length must stay. NULL is a no-op. */
inline void url_mask(char *text) noexcept { emq_url_mask(text); }
inline void url_mask(std::string &text) noexcept { emq_url_mask(text.data()); }

/* What a maxmemory-policy can do to a queue, one sentence; "" when it
 * evicts nothing (noeviction) or policy is "" (emq_eviction_warning). */
inline std::string eviction_warning(const std::string &policy) {
    const char *w =
        emq_eviction_warning(policy.empty() ? nullptr : policy.c_str());
    return w != nullptr ? w : "";
}

/* The name of one capability bit ("xautoclaim_deleted"; "" for anything
 * else: emq_capability_name), and the names of the capabilities server
 * has, lowest bit first (emq_server_capability). */
inline std::string capability_name(uint32_t cap) {
    const char *n = emq_capability_name(cap);
    return n != nullptr ? n : "";
}
inline std::vector<std::string> server_capabilities(const emq_server &server) {
    std::vector<std::string> out;
    for (size_t i = 0;; i++) {
        const char *n = emq_server_capability(&server, i);
        if (n == nullptr)
            return out;
        out.emplace_back(n);
    }
}

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

namespace detail {
/* A conf's log and statistics callbacks: shared by the conf, its copies
 * and every handle made from them (the C side holds a pointer to it), so
 * it lives as long as the last of them; never changed once installed. */
struct conf_callbacks {
    std::function<void(emq_log_level, std::string_view)> log;
    std::function<void(std::string_view)> stats;
};
/* The boundaries: an exception is dropped with the line. */
inline void log_line(void *opaque, emq_log_level level,
                     const char *message) noexcept {
    try {
        static_cast<const conf_callbacks *>(opaque)->log(level, message);
    } catch (...) {
    }
}
inline void stats_line(void *opaque, const char *json, size_t len) noexcept {
    try {
        static_cast<const conf_callbacks *>(opaque)->stats({json, len});
    } catch (...) {
    }
}
using callbacks_ptr = std::shared_ptr<const conf_callbacks>;
} // namespace detail

/* A configuration (emq_conf_t): set properties by name (docs/
 * CONFIGURATION.md); a bad name or value throws, naming it. */
class conf {
  public:
    /* One log line (no newline), on the thread that logs. */
    using log_fn = std::function<void(emq_log_level, std::string_view)>;
    /* A consumer's statistics as one JSON object, every
     * stats.interval_ms, on its upkeep thread (emq_stats_fn). */
    using stats_fn = std::function<void(std::string_view)>;
    /* One property of the table (emq_conf_property): name, default, one
     * line of documentation, which part reads it ("conn", "producer",
     * ...: emq_conf_property_readers), and the inclusive bounds of an
     * integer property (ranged: emq_conf_property_range). */
    struct property {
        std::string name;
        std::string default_value;
        std::string doc;
        std::string readers;
        bool ranged = false;
        int64_t min = 0;
        int64_t max = 0;
    };

    conf() : c_(emq_conf_new()) {
        if (c_ == nullptr)
            throw std::bad_alloc();
    }
    ~conf() { emq_conf_destroy(c_); }
    conf(conf &&o) noexcept
        : c_(std::exchange(o.c_, nullptr)), cb_(std::move(o.cb_)) {}
    conf &operator=(conf &&o) noexcept {
        std::swap(c_, o.c_);
        std::swap(cb_, o.cb_);
        return *this;
    }
    conf(const conf &) = delete;
    conf &operator=(const conf &) = delete;
    /* A copy of every property and callback (emq_conf_dup). */
    conf dup() const {
        emq_conf_t *d = emq_conf_dup(c_);
        if (d == nullptr)
            throw std::bad_alloc();
        return conf(d, cb_);
    }

    conf &set(const std::string &name, const std::string &value) {
        emq_error e;
        detail::check(emq_conf_set(c_, name.c_str(), value.c_str(), &e), e);
        return *this;
    }
    /* The current value of property name (emq_conf_get; the password
     * reads back as "(set)" or ""). */
    std::string value(const std::string &name) const {
        std::string buf(256, '\0');
        for (;;) {
            emq_error e;
            detail::check(
                emq_conf_get(c_, name.c_str(), buf.data(), buf.size(), &e), e);
            size_t len = std::strlen(buf.c_str());
            if (len + 1 < buf.size()) { /* not cut: it all fit */
                buf.resize(len);
                return buf;
            }
            buf.assign(buf.size() * 2, '\0');
        }
    }
    /* The stream key the queue or stream property names ("emq:{jobs}"),
     * without touching the network (emq_conf_stream_key). */
    std::string stream_key() const {
        std::string buf(256, '\0');
        for (;;) {
            emq_error e;
            emq_status st = emq_conf_stream_key(c_, buf.data(), buf.size(), &e);
            if (st == EMQ_OK) {
                buf.resize(std::strlen(buf.c_str()));
                return buf;
            }
            if (st != EMQ_ELIMIT)
                throw error(e);
            buf.assign(buf.size() * 2, '\0');
        }
    }
    /* Routes the log lines of every handle made from this conf (or a
     * dup) from now on to fn (empty: the default, stderr) (emq_conf_set_log).
     * Handles made before keep the callback they were made with. */
    conf &set_log(log_fn fn) {
        auto next = std::make_shared<detail::conf_callbacks>(
            cb_ ? *cb_ : detail::conf_callbacks{});
        next->log = std::move(fn);
        install(std::move(next));
        return *this;
    }
    /* The statistics callback of consumers made from this conf (empty:
     * none), called every stats.interval_ms (emq_conf_set_stats). Must
     * return quickly. */
    conf &set_stats(stats_fn fn) {
        auto next = std::make_shared<detail::conf_callbacks>(
            cb_ ? *cb_ : detail::conf_callbacks{});
        next->stats = std::move(fn);
        install(std::move(next));
        return *this;
    }
    /* Property i of the table; past the end std::out_of_range. */
    static property property_at(size_t i) {
        const char *name = nullptr, *def = nullptr, *doc = nullptr;
        if (emq_conf_property(i, &name, &def, &doc) != EMQ_OK)
            throw std::out_of_range("echomq::conf: no property " +
                                    std::to_string(i));
        property p;
        p.name = name != nullptr ? name : "";
        p.default_value = def != nullptr ? def : "";
        p.doc = doc != nullptr ? doc : "";
        const char *readers = emq_conf_property_readers(i);
        p.readers = readers != nullptr ? readers : "";
        p.ranged = emq_conf_property_range(i, &p.min, &p.max) == EMQ_OK;
        return p;
    }
    /* The whole table, in order. */
    static std::vector<property> properties() {
        std::vector<property> out;
        for (size_t i = 0;
             emq_conf_property(i, nullptr, nullptr, nullptr) == EMQ_OK; i++)
            out.push_back(property_at(i));
        return out;
    }
    const emq_conf_t *get() const noexcept { return c_; }
    /* What a handle made from this conf keeps alive: its callbacks. */
    const detail::callbacks_ptr &callbacks() const noexcept { return cb_; }

  private:
    conf(emq_conf_t *c, detail::callbacks_ptr cb) noexcept
        : c_(c), cb_(std::move(cb)) {}
    /* Points the C conf at next's callbacks (both: a change of one makes
     * a new object); the old object lives on in the handles that hold it. */
    void install(std::shared_ptr<detail::conf_callbacks> next) noexcept {
        emq_conf_set_log(c_, next->log ? &detail::log_line : nullptr,
                         next.get());
        emq_conf_set_stats(c_, next->stats ? &detail::stats_line : nullptr,
                           next.get());
        cb_ = std::move(next);
    }
    emq_conf_t *c_;
    detail::callbacks_ptr cb_;
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
/* The C view of a command's arguments: borrowed from args for the call. */
struct c_args {
    explicit c_args(const std::vector<std::string> &args) {
        argv.reserve(args.size());
        lens.reserve(args.size());
        for (const std::string &a : args) {
            argv.push_back(a.data());
            lens.push_back(a.size());
        }
    }
    int argc() const noexcept { return static_cast<int>(argv.size()); }
    std::vector<const char *> argv;
    std::vector<size_t> lens;
};
/* The C view of a list of IDs: borrowed from ids for the call. */
inline std::vector<const char *> c_ids(const std::vector<std::string> &ids) {
    std::vector<const char *> out;
    out.reserve(ids.size());
    for (const std::string &id : ids)
        out.push_back(id.c_str());
    return out;
}
} // namespace detail

/* Fields as JSON (emq_fields_json): {"name":"value",...}, or [[name,
 * value],...] when a name is not UTF-8; bytes that are not UTF-8 as
 * {"base64":"..."}. */
inline std::string to_json(const std::vector<field> &fields) {
    std::vector<emq_field> f = detail::c_fields(fields);
    return detail::snprintf_string([&f](char *buf, size_t size) {
        return emq_fields_json(f.data(), f.size(), buf, size);
    });
}

/* Fields parsed from one JSON object (emq_fields_from_json), owned: one
 * block, freed by the destructor (emq_fields_free); movable, not
 * copyable. fields() views into it, for producer::produce. */
class parsed_fields {
  public:
    parsed_fields() noexcept = default;
    /* Throws EMQ_EINVAL naming the column of what is wrong. */
    explicit parsed_fields(std::string_view json) {
        emq_error e;
        detail::check(
            emq_fields_from_json(json.data(), json.size(), &f_, &n_, &e), e);
    }
    ~parsed_fields() { emq_fields_free(f_); }
    parsed_fields(parsed_fields &&o) noexcept
        : f_(std::exchange(o.f_, nullptr)), n_(std::exchange(o.n_, 0)) {}
    parsed_fields &operator=(parsed_fields &&o) noexcept {
        std::swap(f_, o.f_);
        std::swap(n_, o.n_);
        return *this;
    }
    parsed_fields(const parsed_fields &) = delete;
    parsed_fields &operator=(const parsed_fields &) = delete;

    size_t size() const noexcept { return n_; }
    bool empty() const noexcept { return n_ == 0; }
    /* Field i, in document order; i out of range std::out_of_range. */
    field at(size_t i) const {
        if (i >= n_)
            throw std::out_of_range("echomq::parsed_fields: index out of "
                                    "range");
        return {{f_[i].name, f_[i].name_len}, {f_[i].value, f_[i].value_len}};
    }
    /* Every field, viewing this object (valid while it lives). */
    std::vector<field> fields() const {
        std::vector<field> out;
        out.reserve(n_);
        for (size_t i = 0; i < n_; i++)
            out.push_back(at(i));
        return out;
    }

  private:
    emq_field *f_ = nullptr;
    size_t n_ = 0;
};
inline parsed_fields fields_from_json(std::string_view json) {
    return parsed_fields(json);
}

/* The outcome of one asynchronous entry (emq_delivery): borrowed for the
 * callback only; copy id and error->message to keep them. */
using delivery = emq_delivery;

/* What a produce call asks of one entry beyond its fields
 * (emq_produce_opts, docs/QUEUES.md): a message key (a topic's
 * partition), a delay or a due time (the entry waits in the server, and
 * its ID is a handle "delayed-..." that admin::cancel takes), an
 * idempotency key (added only once within dedup_ttl_ms; every call
 * answers the first entry's ID), and a priority (0, the most urgent, to
 * 9; -1: none). "" and 0 mean none; the library checks the values. */
struct produce_opts {
    std::string key;
    int64_t delay_ms = 0;
    int64_t due_ms = 0;
    std::string dedup_key;
    int64_t dedup_ttl_ms = 0;
    int64_t priority = -1;
};

/* One entry of producer::produce_batch: its fields, its message key
 * ("": none, the next partition in turn) and an explicit ID ("ms-seq",
 * "ms-*"; "": an automatic one). */
struct message {
    std::vector<field> fields;
    std::string key;
    std::string id;
};

namespace detail {
/* The C view of o (its key, or key when o has none): borrowed from both
 * for the call. */
inline emq_produce_opts c_opts(const produce_opts &o,
                               const std::string &key = {}) {
    emq_produce_opts c = EMQ_PRODUCE_OPTS_INIT;
    const std::string &k = o.key.empty() ? key : o.key;
    if (!k.empty()) {
        c.key = k.data();
        c.key_len = k.size();
    }
    c.delay_ms = o.delay_ms;
    c.due_ms = o.due_ms;
    if (!o.dedup_key.empty()) {
        c.dedup_key = o.dedup_key.data();
        c.dedup_key_len = o.dedup_key.size();
    }
    c.dedup_ttl_ms = o.dedup_ttl_ms;
    c.priority = o.priority;
    return c;
}
} // namespace detail

/* A producer (emq_producer_t). Any thread, every method but the
 * destructor and move assignment. */
class producer {
  public:
    /* Called once per asynchronous entry with its outcome, on a thread of
     * the producer (producer.delivery thread) or inside poll() and
     * flush() (producer.delivery poll). Must not throw (see the top of
     * this file); may call produce_async, not flush. */
    using delivery_fn = std::function<void(const delivery &)>;

    explicit producer(const conf &c) : cb_(c.callbacks()) {
        emq_error e;
        detail::check(emq_producer_new(c.get(), &p_, &e), e);
    }
    /* Entries not sent yet are called back EMQ_ECLOSED (flush() first to
     * send them); every callback still owed runs before it returns. */
    ~producer() { emq_producer_destroy(p_); }
    producer(producer &&o) noexcept
        : cb_(std::move(o.cb_)), p_(std::exchange(o.p_, nullptr)) {}
    producer &operator=(producer &&o) noexcept {
        std::swap(cb_, o.cb_);
        std::swap(p_, o.p_);
        return *this;
    }
    producer(const producer &) = delete;
    producer &operator=(const producer &) = delete;

    /* Adds one entry; returns its ID (emq_produce). */
    std::string produce(const std::vector<field> &fields) {
        std::vector<emq_field> f = detail::c_fields(fields);
        emq_id id;
        emq_error e;
        detail::check(emq_produce(p_, f.data(), f.size(), &id, &e), e);
        return id.str;
    }
    /* Adds one entry with a message key (emq_produce_keyed). */
    std::string produce(std::string_view key,
                        const std::vector<field> &fields) {
        std::vector<emq_field> f = detail::c_fields(fields);
        emq_id id;
        emq_error e;
        detail::check(emq_produce_keyed(p_, key.data(), key.size(), f.data(),
                                        f.size(), &id, &e),
                      e);
        return id.str;
    }
    /* Adds one entry with options (emq_produce_ex); returns its ID, or
     * the handle of an entry that waits (delayed, or with a priority).
     * A bad option throws EMQ_EINVAL before anything is sent. */
    std::string produce(const std::vector<field> &fields,
                        const produce_opts &opts) {
        std::vector<emq_field> f = detail::c_fields(fields);
        emq_produce_opts o = detail::c_opts(opts);
        emq_id id;
        emq_error e;
        detail::check(emq_produce_ex(p_, f.data(), f.size(), &o, &id, &e), e);
        return id.str;
    }
    /* Adds the entries, pipelined, with options per entry when opts is
     * not empty (one per message, else EMQ_EINVAL; an option's key
     * overrides the message's): emq_produce_batch, _batch_keyed when a
     * message has a key, _batch_ex with opts. Returns each entry's ID
     * (or handle). A failure throws echomq::batch_error, with the IDs of
     * the entries added all the same. */
    std::vector<std::string>
    produce_batch(const std::vector<message> &msgs,
                  const std::vector<produce_opts> &opts = {}) {
        size_t n = msgs.size();
        if (!opts.empty() && opts.size() != n)
            throw detail::make_error(
                EMQ_EINVAL, "produce_batch: " + std::to_string(opts.size()) +
                                " options for " + std::to_string(n) +
                                " messages");
        std::vector<std::vector<emq_field>> f;
        std::vector<emq_message> cm;
        f.reserve(n);
        cm.reserve(n);
        bool keyed = false;
        for (const message &m : msgs) {
            f.push_back(detail::c_fields(m.fields));
            cm.push_back({f.back().data(), f.back().size(),
                          m.id.empty() ? nullptr : m.id.c_str()});
            keyed = keyed || !m.key.empty();
        }
        std::vector<emq_id> ids(n);
        size_t written = 0;
        emq_error e;
        emq_status st;
        if (!opts.empty()) {
            std::vector<emq_produce_opts> co;
            co.reserve(n);
            for (size_t i = 0; i < n; i++)
                co.push_back(detail::c_opts(opts[i], msgs[i].key));
            st = emq_produce_batch_ex(p_, cm.data(), co.data(), n, ids.data(),
                                      &written, &e);
        } else if (keyed) {
            std::vector<emq_keyed_message> km;
            km.reserve(n);
            for (size_t i = 0; i < n; i++) {
                const std::string &k = msgs[i].key;
                km.push_back({cm[i], k.empty() ? nullptr : k.data(), k.size()});
            }
            st = emq_produce_batch_keyed(p_, km.data(), n, ids.data(), &written,
                                         &e);
        } else {
            st = emq_produce_batch(p_, cm.data(), n, ids.data(), &written, &e);
        }
        std::vector<std::string> out;
        out.reserve(n);
        for (const emq_id &id : ids)
            out.emplace_back(id.str);
        if (st != EMQ_OK)
            throw batch_error(e, std::move(out), written);
        return out;
    }
    /* Queues one entry (fields copied) and returns at once; cb (moved in,
     * freed after its one call) gets the outcome (emq_produce_async).
     * Throws EMQ_ELIMIT when the producer's queue is full, EMQ_EINVAL for
     * no fields or an empty cb: then cb is never called. */
    void produce_async(const std::vector<field> &fields, delivery_fn cb) {
        std::vector<emq_field> f = detail::c_fields(fields);
        queue_async(
            std::move(cb), [&](emq_delivery_fn fn, void *opaque, emq_error *e) {
                return emq_produce_async(p_, f.data(), f.size(), fn, opaque, e);
            });
    }
    /* produce_async with a message key (emq_produce_async_keyed). */
    void produce_async(std::string_view key, const std::vector<field> &fields,
                       delivery_fn cb) {
        std::vector<emq_field> f = detail::c_fields(fields);
        queue_async(std::move(cb), [&](emq_delivery_fn fn, void *opaque,
                                       emq_error *e) {
            return emq_produce_async_keyed(p_, key.data(), key.size(), f.data(),
                                           f.size(), fn, opaque, e);
        });
    }
    /* produce_async with options (emq_produce_async_ex): a bad option
     * throws EMQ_EINVAL (cb never called); a waiting entry's
     * delivery.id is its handle. */
    void produce_async(const std::vector<field> &fields,
                       const produce_opts &opts, delivery_fn cb) {
        std::vector<emq_field> f = detail::c_fields(fields);
        emq_produce_opts o = detail::c_opts(opts);
        queue_async(std::move(cb),
                    [&](emq_delivery_fn fn, void *opaque, emq_error *e) {
                        return emq_produce_async_ex(p_, f.data(), f.size(), &o,
                                                    fn, opaque, e);
                    });
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
    /* Hands cb to send (the C call, given the boundary and cb's
     * address); cb is owned by the boundary once send succeeds. */
    template <typename Send> void queue_async(delivery_fn cb, Send send) {
        if (!cb)
            throw detail::make_error(EMQ_EINVAL,
                                     "produce_async needs a delivery "
                                     "callback: an empty one was given");
        auto owned = std::make_unique<delivery_fn>(std::move(cb));
        emq_error e;
        detail::check(send(&producer::delivered, owned.get(), &e), e);
        (void)owned.release(); /* delivered() frees it */
    }
    /* The boundary: the callback's one call, then its function freed. */
    static void delivered(void *opaque, const emq_delivery *d) noexcept {
        std::unique_ptr<delivery_fn> cb(static_cast<delivery_fn *>(opaque));
        (*cb)(*d);
    }
    detail::callbacks_ptr cb_;
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
/* An entry as one JSON object (emq_entry_json), with the partition of a
 * topic's entry when partition >= 0 (emq_entry_json_partition). */
inline std::string to_json(const entry &e, int partition = -1) {
    return detail::snprintf_string([&e, partition](char *buf, size_t size) {
        return partition < 0
                   ? emq_entry_json(&e, buf, size)
                   : emq_entry_json_partition(&e, partition, buf, size);
    });
}

/* What a handler answers for one entry (emq_handler_fn): its verdict and,
 * for EMQ_RETRY and EMQ_DEAD, a reason that ends up in the dead letter
 * (cut to the room the library gives, at least 255 bytes). A verdict
 * converts to an outcome without a reason, so a handler may return
 * EMQ_ACK; echomq::ack(), retry(reason) and dead(reason) make the others
 * (a lambda returning both kinds declares "-> echomq::outcome"). */
class outcome {
  public:
    outcome(verdict v) noexcept : v_(v) {} /* implicit: return EMQ_ACK */
    outcome(verdict v, std::string reason)
        : v_(v), reason_(std::move(reason)) {}
    verdict code() const noexcept { return v_; }
    const std::string &reason() const noexcept { return reason_; }

  private:
    verdict v_;
    std::string reason_;
};
inline outcome ack() noexcept { return outcome(EMQ_ACK); }
/* Delivered again after retry.backoff_ms, counting toward
 * max_deliveries; reason is the dead letter's if it is the last. */
inline outcome retry(std::string reason = {}) {
    return outcome(EMQ_RETRY, std::move(reason));
}
/* To the dead letters now, with reason. */
inline outcome dead(std::string reason = {}) {
    return outcome(EMQ_DEAD, std::move(reason));
}

/* A handler of consumer and pool: called for each entry (borrowed for
 * the call). */
using handler = std::function<outcome(const entry &)>;

namespace detail {
/* The boundary of a handler (emq_handler_fn, opaque a handler): its
 * outcome's reason written for the library; no exception leaves. */
inline emq_verdict call_handler(void *opaque, const emq_entry *e, char *reason,
                                size_t reason_size) noexcept {
    return guarded(
        [&] {
            outcome o = (*static_cast<handler *>(opaque))(*e);
            if (o.code() != EMQ_ACK && !o.reason().empty())
                copy_reason(o.reason().c_str(), reason, reason_size);
            return o.code();
        },
        reason, reason_size);
}
} // namespace detail

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
    using handler = echomq::handler;
    /* Entries it leaves undecided are acknowledged; when it throws, they
     * are retried with the exception's what() as reason (those it decided
     * keep their verdict). */
    using batch_handler = std::function<void(batch &)>;

    /* Pull mode (a NULL handler): driven by poll, settled by ack, retry
     * and dead. */
    explicit consumer(const conf &c) : cb_(c.callbacks()) {
        emq_error e;
        detail::check(emq_consumer_new(c.get(), nullptr, nullptr, &c_, &e), e);
    }
    consumer(const conf &c, handler h)
        : cb_(c.callbacks()), h_(std::make_unique<handler>(std::move(h))) {
        emq_error e;
        detail::check(
            emq_consumer_new(c.get(), &detail::call_handler, h_.get(), &c_, &e),
            e);
    }
    /* A batch handler (emq_consumer_new_batch): run() calls it with up to
     * batch.max entries at once. */
    consumer(const conf &c, batch_handler h)
        : cb_(c.callbacks()),
          bh_(std::make_unique<batch_handler>(std::move(h))) {
        emq_error e;
        detail::check(emq_consumer_new_batch(c.get(), &consumer::call_batch,
                                             bh_.get(), &c_, &e),
                      e);
    }
    /* Not while run() runs; pull mode is closed without waiting
     * (emq_consumer_destroy): polled entries stay valid, unsettled. */
    ~consumer() { emq_consumer_destroy(c_); }
    consumer(consumer &&o) noexcept
        : cb_(std::move(o.cb_)), h_(std::move(o.h_)), bh_(std::move(o.bh_)),
          c_(std::exchange(o.c_, nullptr)) {}
    consumer &operator=(consumer &&o) noexcept {
        std::swap(cb_, o.cb_);
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
    /* The boundary of a batch handler: no exception leaves it. */
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
    detail::callbacks_ptr cb_;
    std::unique_ptr<handler> h_; /* stable addresses: the C side's opaque */
    std::unique_ptr<batch_handler> bh_;
    emq_consumer_t *c_ = nullptr;
};

/* A pool (emq_pool_t): n consumers on n threads, named "<consumer>-<i>",
 * one handler called from all of them at once. run on one thread; stop
 * from any. */
class pool {
  public:
    pool(const conf &c, int n, handler h)
        : cb_(c.callbacks()), h_(std::make_unique<handler>(std::move(h))) {
        emq_error e;
        detail::check(
            emq_pool_new(c.get(), n, &detail::call_handler, h_.get(), &p_, &e),
            e);
    }
    /* Not while run() runs. */
    ~pool() { emq_pool_destroy(p_); }
    pool(pool &&o) noexcept
        : cb_(std::move(o.cb_)), h_(std::move(o.h_)),
          p_(std::exchange(o.p_, nullptr)) {}
    pool &operator=(pool &&o) noexcept {
        std::swap(cb_, o.cb_);
        std::swap(h_, o.h_);
        std::swap(p_, o.p_);
        return *this;
    }
    pool(const pool &) = delete;
    pool &operator=(const pool &) = delete;

    /* Runs every consumer until stop() (returns) or the first fatal error
     * of any (throws; the others are stopped). */
    void run() {
        emq_error e;
        detail::check(emq_pool_run(p_, &e), e);
    }
    /* Any thread, async-signal-safe. */
    void stop() noexcept { emq_pool_stop(p_); }
    /* The counters of consumer i (0-based; out of range
     * std::out_of_range), and as JSON; any thread. */
    emq_consumer_stats stats(int i) const {
        emq_consumer_stats s;
        emq_consumer_stats_get(member(i), &s);
        return s;
    }
    std::string stats_json(int i) const {
        emq_consumer_t *c = member(i);
        return detail::snprintf_string([c](char *buf, size_t size) {
            return emq_consumer_stats_json(c, buf, size);
        });
    }
    emq_pool_t *get() noexcept { return p_; }

  private:
    emq_consumer_t *member(int i) const {
        emq_consumer_t *c = emq_pool_consumer(p_, i);
        if (c == nullptr)
            throw std::out_of_range("echomq::pool: no consumer " +
                                    std::to_string(i));
        return c;
    }
    detail::callbacks_ptr cb_;
    std::unique_ptr<handler> h_; /* stable address: the C side's opaque */
    emq_pool_t *p_ = nullptr;
};

/* What admin verbs and connections return, owned: a queue's description
 * and a reply (of admin_view::command, connection::command), freed by
 * their deleters. */
namespace detail {
struct queue_info_free {
    void operator()(emq_queue_info *i) const noexcept {
        emq_queue_info_free(i);
    }
};
struct reply_free {
    void operator()(emq_reply *r) const noexcept { emq_reply_free(r); }
};
struct array_free {
    void operator()(void *a) const noexcept { emq_free_array(a); }
};
/* Frees a list of queue names (emq_admin_scan_queues) when it ends. */
struct queue_names {
    char **names = nullptr;
    size_t n = 0;
    queue_names() noexcept = default;
    queue_names(const queue_names &) = delete;
    queue_names &operator=(const queue_names &) = delete;
    ~queue_names() { emq_queue_names_free(names, n); }
};
} // namespace detail
using queue_info = std::unique_ptr<emq_queue_info, detail::queue_info_free>;
using reply = std::unique_ptr<emq_reply, detail::reply_free>;

/* A reply, or an element of one, read through the accessors of echomq.h:
 * borrowed from the reply tree (valid while its owner lives). A view of
 * no reply reads as EMQ_REPLY_NULL. */
class reply_view {
  public:
    explicit reply_view(const emq_reply *r) noexcept : r_(r) {}
    reply_view(const reply &r) noexcept : r_(r.get()) {} /* implicit */

    emq_reply_type kind() const noexcept { return emq_reply_kind(r_); }
    /* The text of a string, status, error, bignum, verbatim or double
     * reply (binary-safe); "" for other types. */
    std::string_view str() const noexcept {
        size_t len = 0;
        const char *s = emq_reply_str(r_, &len);
        return s != nullptr ? std::string_view(s, len) : std::string_view();
    }
    /* An integer (a bool as 0/1), a double; 0 for other types. */
    long long integer() const noexcept { return emq_reply_integer(r_); }
    double number() const noexcept { return emq_reply_double(r_); }
    /* Elements of an aggregate (a map counts keys and values); element i
     * out of range std::out_of_range. */
    size_t size() const noexcept { return emq_reply_len(r_); }
    reply_view operator[](size_t i) const {
        const emq_reply *e = emq_reply_at(r_, i);
        if (e == nullptr)
            throw std::out_of_range("echomq::reply_view: no element " +
                                    std::to_string(i));
        return reply_view(e);
    }
    /* A verbatim reply's format ("txt"); "" otherwise. */
    std::string_view format() const noexcept { return emq_reply_format(r_); }
    /* The RESP3 attributes sent before it, if any. */
    std::optional<reply_view> attribute() const noexcept {
        const emq_reply *a = emq_reply_attribute(r_);
        if (a == nullptr)
            return std::nullopt;
        return reply_view(a);
    }
    /* An error reply whose first word is prefix ("": any error reply). */
    bool is_error(const std::string &prefix = {}) const noexcept {
        return emq_reply_is_error(r_, prefix.c_str()) != 0;
    }
    const emq_reply *get() const noexcept { return r_; }

  private:
    const emq_reply *r_;
};

/* One connection to one server (emq_conn_t): commands, pipelining,
 * reconnection. One thread at a time. */
class connection {
  public:
    explicit connection(const conf &c) : cb_(c.callbacks()) {
        emq_error e;
        detail::check(emq_conn_new(c.get(), &c_, &e), e);
    }
    ~connection() { emq_conn_destroy(c_); }
    connection(connection &&o) noexcept
        : cb_(std::move(o.cb_)), c_(std::exchange(o.c_, nullptr)) {}
    connection &operator=(connection &&o) noexcept {
        std::swap(cb_, o.cb_);
        std::swap(c_, o.c_);
        return *this;
    }
    connection(const connection &) = delete;
    connection &operator=(const connection &) = delete;

    /* Sends one command (binary-safe arguments) and waits for its reply
     * (emq_conn_command); an error reply is a reply, not a throw. */
    reply command(const std::vector<std::string> &args) {
        detail::c_args a(args);
        emq_reply *r = nullptr;
        emq_error e;
        detail::check(emq_conn_command(c_, a.argc(), a.argv.data(),
                                       a.lens.data(), &r, &e),
                      e);
        return reply(r);
    }
    /* Pipelining: appends a command without sending (emq_conn_append);
     * get_reply sends what is appended and returns the next reply in
     * order (emq_conn_get_reply); pending counts those unread. */
    void append(const std::vector<std::string> &args) {
        detail::c_args a(args);
        emq_error e;
        detail::check(
            emq_conn_append(c_, a.argc(), a.argv.data(), a.lens.data(), &e), e);
    }
    reply get_reply() {
        emq_reply *r = nullptr;
        emq_error e;
        detail::check(emq_conn_get_reply(c_, &r, &e), e);
        return reply(r);
    }
    size_t pending() const noexcept { return emq_conn_pending(c_); }
    /* The server as learned at the last connect (emq_conn_server); none
     * when unknown. */
    std::optional<emq_server> server() const noexcept {
        emq_server s;
        if (emq_conn_server(c_, &s) == 0)
            return std::nullopt;
        return s;
    }
    /* Connects again, with the reconnect backoff (emq_conn_reconnect). */
    void reconnect() {
        emq_error e;
        detail::check(emq_conn_reconnect(c_, &e), e);
    }
    bool broken() const noexcept { return emq_conn_is_broken(c_) != 0; }
    uint64_t reconnects() const noexcept { return emq_conn_reconnects(c_); }
    /* The socket, for poll-based integration; -1 when broken. */
    int fd() const noexcept { return emq_conn_fd(c_); }
    emq_conn_t *get() noexcept { return c_; }

  private:
    detail::callbacks_ptr cb_;
    emq_conn_t *c_ = nullptr;
};

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

/* The function library's state on each master (admin::functions), owned:
 * freed by the destructor (emq_functions_states_free); movable, not
 * copyable. */
class functions_states {
  public:
    functions_states() noexcept = default;
    functions_states(emq_functions_state *s, size_t n) noexcept
        : s_(s), n_(n) {}
    ~functions_states() { emq_functions_states_free(s_); }
    functions_states(functions_states &&o) noexcept
        : s_(std::exchange(o.s_, nullptr)), n_(std::exchange(o.n_, 0)) {}
    functions_states &operator=(functions_states &&o) noexcept {
        std::swap(s_, o.s_);
        std::swap(n_, o.n_);
        return *this;
    }
    functions_states(const functions_states &) = delete;
    functions_states &operator=(const functions_states &) = delete;

    size_t size() const noexcept { return n_; }
    bool empty() const noexcept { return n_ == 0; }
    const emq_functions_state &operator[](size_t i) const noexcept {
        return s_[i];
    }
    const emq_functions_state *begin() const noexcept { return s_; }
    const emq_functions_state *end() const noexcept { return s_ + n_; }

  private:
    emq_functions_state *s_ = nullptr;
    size_t n_ = 0;
};

/* What admin_view::group_setid_effect finds: entries the move would pass
 * over (never delivered to the group), and those it would deliver again
 * or anew; at most one is not 0. */
struct setid_effect {
    uint64_t skipped = 0;
    uint64_t replayed = 0;
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
        std::unique_ptr<emq_pending_entry, detail::array_free> own(raw);
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
    /* What group_setid(group, to) would do, moving nothing. */
    setid_effect group_setid_effect(const std::string &group,
                                    const std::string &to) {
        setid_effect r;
        emq_error e;
        detail::check(emq_admin_group_setid_effect(a_, group.c_str(),
                                                   to.c_str(), &r.skipped,
                                                   &r.replayed, &e),
                      e);
        return r;
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
    dead_letters dead_list(size_t max = 0) {
        emq_dead_letter *l = nullptr;
        size_t n = 0;
        emq_error e;
        detail::check(emq_admin_dead_list(a_, max, &l, &n, &e), e);
        return dead_letters(l, n);
    }
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
        std::vector<const char *> c_ids = detail::c_ids(ids);
        uint64_t moved = 0;
        emq_error e;
        detail::check(
            emq_admin_dead_requeue(a_, c_ids.data(), c_ids.size(), &moved, &e),
            e);
        return moved;
    }
    /* dead_requeue with flags (EMQ_REQUEUE_FORCE: also letters the
     * checks refuse; emq_admin_dead_requeue_flags). */
    uint64_t dead_requeue(const std::vector<std::string> &ids, unsigned flags) {
        if (ids.empty())
            return 0;
        std::vector<const char *> c_ids = detail::c_ids(ids);
        uint64_t moved = 0;
        emq_error e;
        detail::check(emq_admin_dead_requeue_flags(
                          a_, c_ids.data(), c_ids.size(), flags, &moved, &e),
                      e);
        return moved;
    }
    /* Puts every dead letter back on the queue; how many moved. */
    uint64_t dead_requeue_all(unsigned flags = 0) {
        uint64_t moved = 0;
        emq_error e;
        detail::check(
            emq_admin_dead_requeue_flags(a_, nullptr, 0, flags, &moved, &e), e);
        return moved;
    }
    /* Deletes every dead letter; how many there were. */
    uint64_t dead_purge() {
        uint64_t removed = 0;
        emq_error e;
        detail::check(emq_admin_dead_purge(a_, &removed, &e), e);
        return removed;
    }
    /* Group's limits (emq_admin_group_limits): rate per second and
     * max_in_flight, 0 for none; with set, first records set's (each > 0:
     * that limit; 0: none; -1: as it is) and returns the result. */
    emq_group_limits group_limits(const std::string &group) {
        emq_group_limits out{};
        emq_error e;
        detail::check(
            emq_admin_group_limits(a_, group.c_str(), nullptr, &out, &e), e);
        return out;
    }
    emq_group_limits group_limits(const std::string &group,
                                  const emq_group_limits &set) {
        emq_group_limits out{};
        emq_error e;
        detail::check(emq_admin_group_limits(a_, group.c_str(), &set, &out, &e),
                      e);
        return out;
    }
    /* The queue's priorities, none when it has none (emq_admin_
     * priorities); set_age_ms >= 0 first records that aging step, which
     * gives the queue priorities. */
    std::optional<emq_priority_info> priorities(int64_t set_age_ms = -1) {
        emq_priority_info out;
        int has = 0;
        emq_error e;
        detail::check(emq_admin_priorities(a_, set_age_ms, &out, &has, &e), e);
        if (has == 0)
            return std::nullopt;
        return out;
    }
    /* The queue's delayed entries (emq_admin_delayed). */
    emq_delayed_info delayed() {
        emq_delayed_info out;
        emq_error e;
        detail::check(emq_admin_delayed(a_, &out, &e), e);
        return out;
    }
    /* Cancels entries no group was handed yet, in one atomic step
     * (emq_admin_cancel): delayed entries' handles and stream IDs, 1 to
     * EMQ_CANCEL_MAX; returns what happened to each, in order. Not on a
     * topic handle (EMQ_EINVAL: use a partition's). */
    std::vector<emq_cancel_outcome>
    cancel(const std::vector<std::string> &ids) {
        std::vector<const char *> c_ids = detail::c_ids(ids);
        std::vector<emq_cancel_outcome> out(ids.size(), EMQ_CANCEL_MISSING);
        emq_error e;
        detail::check(emq_admin_cancel(a_, c_ids.data(), c_ids.size(),
                                       out.data(), nullptr, &e),
                      e);
        return out;
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
        detail::c_args a(args);
        emq_reply *r = nullptr;
        emq_error e;
        detail::check(emq_admin_command(a_, a.argc(), a.argv.data(),
                                        a.lens.data(), &r, &e),
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
    explicit admin(const conf &c) : admin_view(nullptr), cb_(c.callbacks()) {
        emq_error e;
        detail::check(emq_admin_new(c.get(), &a_, &e), e);
    }
    ~admin() { emq_admin_destroy(a_); }
    admin(admin &&o) noexcept
        : admin_view(std::exchange(o.a_, nullptr)), cb_(std::move(o.cb_)) {}
    admin &operator=(admin &&o) noexcept {
        std::swap(a_, o.a_);
        std::swap(cb_, o.cb_);
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
        detail::queue_names names;
        emq_error e;
        detail::check(emq_admin_scan_queues(
                          c.get(), pattern.empty() ? nullptr : pattern.c_str(),
                          max, &names.names, &names.n, &e),
                      e);
        return std::vector<std::string>(names.names, names.names + names.n);
    }
    /* echomq's function library on every master of conf's server
     * (emq_admin_functions): looks (EMQ_FUNCTIONS_SHOW), loads it where
     * missing (_LOAD) or also replaces another build's (_REPLACE); one
     * state per master. Any thread: it opens its own connections. */
    static functions_states
    functions(const conf &c, emq_functions_action action = EMQ_FUNCTIONS_SHOW) {
        emq_functions_state *s = nullptr;
        size_t n = 0;
        emq_error e;
        detail::check(emq_admin_functions(c.get(), action, &s, &n, &e), e);
        return functions_states(s, n);
    }
    /* Deletes the echomq library named library ("echomq_<version>") from
     * every master (emq_admin_functions_delete); how many had it. */
    static size_t functions_delete(const conf &c, const std::string &library) {
        size_t deleted = 0;
        emq_error e;
        detail::check(
            emq_admin_functions_delete(c.get(), library.c_str(), &deleted, &e),
            e);
        return deleted;
    }

  private:
    detail::callbacks_ptr cb_;
};

} // namespace echomq

#endif /* ECHOMQ_HPP */
