/* SPDX-License-Identifier: BSD-3-Clause */
/* test_scripts.c: the function library's text, its names and its
 * version's pinned digest (scripts.h).
 *
 * A library version names one text: two builds that load different texts
 * under one name would call each other's functions. So the digest of
 * each version's text is pinned here; a script changed without a new
 * EMQ_LIBRARY_VERSION fails, saying what to do.
 */
#include "harness/test.h"
#include "scripts/scripts.h"

#include <string.h>

/* The digest of EMQ_LIBRARY_VERSION's text. Changing a script after a
 * release: bump EMQ_LIBRARY_VERSION (scripts.h), pin the new digest here,
 * and rename emq<old>_ in the ACL lines of docs/SECURITY.md and the
 * tests. Before the first release (0.1.0) version 1 is re-pinned. */
#define PINNED_VERSION "1"
#define PINNED_DIGEST "0c7e468fe289b0cd"

TEST(scripts_library_version_names_one_text) {
    ASSERT_EQ_STR(EMQ_LIBRARY_VERSION, PINNED_VERSION);
    const char *digest = emq__library_digest();
    if (strcmp(digest, PINNED_DIGEST) != 0)
        FAIL("the scripts changed (digest %s, version %s pinned %s): bump "
             "EMQ_LIBRARY_VERSION in src/scripts/scripts.h and pin the new "
             "digest in tests/unit/test_scripts.c",
             digest, EMQ_LIBRARY_VERSION, PINNED_DIGEST);
}

TEST(scripts_library_text_registers_every_script_and_the_probe) {
    const char *text = emq__library_text();
    ASSERT(text != NULL); /* it fits its room */
    ASSERT(strncmp(text, "#!lua name=" EMQ_LIBRARY_NAME "\n",
                   strlen("#!lua name=" EMQ_LIBRARY_NAME "\n")) == 0);
    const char *digest = emq__library_digest();
    ASSERT_EQ_INT(strlen(digest), 16);
    ASSERT_EQ_INT(strspn(digest, "0123456789abcdef"), 16);
    for (int id = 0; id < EMQ_SCRIPT_COUNT; id++) {
        const char *name = emq__script_function((emq__script_id)id);
        ASSERT(strncmp(name, EMQ_FUNCTION_PREFIX,
                       strlen(EMQ_FUNCTION_PREFIX)) == 0);
        char registered[96];
        snprintf(registered, sizeof registered, "function_name='%s'", name);
        ASSERT_CONTAINS(text, registered);
        for (int other = 0; other < id; other++)
            ASSERT(strcmp(name, emq__script_function((emq__script_id)other)) !=
                   0);
        /* The two heads: the function's name, or the text itself. */
        const char *w[2];
        emq__script_head((emq__script_id)id, 1, w);
        ASSERT_EQ_STR(w[0], "FCALL");
        ASSERT_EQ_STR(w[1], name);
        emq__script_head((emq__script_id)id, 0, w);
        ASSERT_EQ_STR(w[0], "EVAL");
        ASSERT(strstr(text, w[1]) != NULL); /* the body, verbatim */
    }
    char probe[96];
    snprintf(probe, sizeof probe, "function_name='%s'", EMQ_LIBRARY_PROBE);
    ASSERT_CONTAINS(text, probe);
    char answer[48];
    snprintf(answer, sizeof answer, "return '%s'", digest);
    ASSERT_CONTAINS(text, answer);
}
