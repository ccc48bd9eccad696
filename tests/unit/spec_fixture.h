/* What both spec test files share (test_spec.c, test_spec_config.c): a fresh spec per test, and
 * loading JSON into it. */
#ifndef NSBOX_TESTS_SPEC_FIXTURE_H
#define NSBOX_TESTS_SPEC_FIXTURE_H
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "nsbox.h"
#include "spec.h"

#include <arpa/inet.h>
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REGION_MSG(r)                                                                              \
    "This network policy is not supported in region '" r "'; it is supported only in "            \
    "nl-north-1. Pass network=Network.all() or a supported region."

static int setup(void **state)
{
    struct nsbox_spec *s = malloc(sizeof *s);
    if (!s)
        return -1;
    nsbox_spec_init(s);
    nsbox_spec_types_reset();
    *state = s;
    return 0;
}

static int teardown(void **state)
{
    nsbox_spec_free(*state);
    free(*state);
    nsbox_spec_types_reset();
    return 0;
}

static int load(struct nsbox_spec *s, const char *json, struct nsbox_err *e)
{
    nsbox_err_clear(e);
    return nsbox_spec_from_json(s, json, strlen(json), e);
}

static void assert_fails_with(int r, const struct nsbox_err *e, int code, const char *part)
{
    assert_int_equal(r, -1);
    assert_int_equal(e->code, code);
    if (!strstr(e->msg, part))
        fail_msg("message '%s' does not contain '%s'", e->msg, part);
}

#endif
