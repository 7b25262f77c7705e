/* SPDX-License-Identifier: BSD-3-Clause */
/* version.c: the run-time version of the loaded library. */
#include "base.h"

unsigned emq_version(void) { return EMQ_VERSION_HEX; }

const char *emq_version_str(void) { return EMQ_VERSION_STRING; }
