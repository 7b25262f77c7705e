/* SPDX-License-Identifier: BSD-3-Clause */
/* tags.h: the reply tags of the consumer's pipelines.
 *
 * A command appended to a session carries a tag, and its reply comes back
 * to the apply function with it. Each duty that appends commands owns a
 * block of tags, named here once: it numbers its own tags inside its
 * block (EMQ_TAG), and whoever drains a pipeline routes each reply to the
 * duty that sent it by the block alone (EMQ_TAG_BLOCK), so no file picks
 * numbers another must keep clear of. Header only.
 */
#ifndef EMQ_CONSUMER_TAGS_H
#define EMQ_CONSUMER_TAGS_H

/* The duties that append to a consumer's sessions. */
typedef enum emq__tag_block {
    EMQ_TAGS_NONE = 0, /* 0: a command whose reply no duty reads */
    EMQ_TAGS_SETTLE,   /* settle.c: settlements, on either session */
    EMQ_TAGS_UPKEEP,   /* upkeep.c: renewal, refresh, the unblock at a
                          stop */
    EMQ_TAGS_MOVER,    /* mover.c: the look and the move of due entries */
    EMQ_TAGS_MARKS,    /* marks.c: unseen marks and their removals */
    EMQ_TAGS_GRANT,    /* grant.c: the look at the limits and priorities */
    EMQ_TAGS_INHAND    /* inhand.c: in-hand times published and deleted */
} emq__tag_block;

/* Tag n (0-255) of a duty's block, and the block and number of a tag. */
#define EMQ_TAG(block, n) ((int)(block) << 8 | (n))
#define EMQ_TAG_BLOCK(tag) ((emq__tag_block)((tag) >> 8))
#define EMQ_TAG_NUMBER(tag) ((tag)&0xff)

#endif
