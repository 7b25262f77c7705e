/* SPDX-License-Identifier: BSD-3-Clause */
/* streamkey.c: the stream key a configuration names, for callers outside
 * the library (the CLI quotes it in messages, e.g. for WRONGTYPE). It
 * applies the same rules as every handle (keys.c) and never talks to the
 * server.
 */
#include "keys.h"

#include "../conn/conf.h"

#include <string.h>

emq_status emq_conf_stream_key(const emq_conf_t *conf, char *buf, size_t size,
                               emq_error *err) {
    if (buf && size)
        buf[0] = '\0';
    if (conf == NULL || buf == NULL || size == 0)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "emq_conf_stream_key needs a conf and a buffer");
    emq__keys keys;
    emq_status st = emq__keys_resolve(emq__cfg_queue(conf),
                                      emq__cfg_stream(conf), &keys, err);
    if (st != EMQ_OK)
        return st;
    size_t n = strlen(keys.stream);
    if (n >= size)
        st = emq__error_set(err, EMQ_ELIMIT, 0,
                            "stream key of %zu bytes does not fit a buffer "
                            "of %zu",
                            n, size);
    else
        memcpy(buf, keys.stream, n + 1);
    emq__keys_free(&keys);
    if (st == EMQ_OK)
        emq__error_clear(err);
    return st;
}
