/* The network log (sandbox/egress_log.c): its lines, its bound, and readers across the
 * writer's rotation. Files in a fresh mkdtemp directory; no root needed. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "egress_log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct seen {
    uint64_t first, last, count;
    bool ordered;
};

static uint64_t seq_of(const char *text)
{
    return strtoull(text + strlen("{\"seq\":"), NULL, 10);
}

static int count_line(void *ctx, const char *text, size_t len)
{
    struct seen *s = ctx;
    char buf[1024];
    assert_true(len < sizeof buf);
    memcpy(buf, text, len);
    buf[len] = '\0';
    uint64_t q = seq_of(buf);
    if (!s->count)
        s->first = q;
    else if (q != s->last + 1)
        s->ordered = false;
    s->last = q;
    s->count++;
    return 0;
}

static char *tmpdir(void)
{
    char *d = strdup("/tmp/nsbox-elog-XXXXXX");
    assert_non_null(mkdtemp(d));
    return d;
}

static void rmdir_all(char *d)
{
    char p[512];
    snprintf(p, sizeof p, "%s/" NSBOX_EGRESS_LOG_FILE, d);
    unlink(p);
    snprintf(p, sizeof p, "%s/" NSBOX_EGRESS_LOG_OLDER, d);
    unlink(p);
    rmdir(d);
    free(d);
}

static const struct nsbox_egress_entry spliced = {.start_ms = 1765000000123,
                                                  .duration_ms = 42,
                                                  .name = "api.example.com",
                                                  .port = 443,
                                                  .verdict = "spliced",
                                                  .address = "198.51.100.10",
                                                  .bytes_up = 517,
                                                  .bytes_down = 4096};

static void test_line_fields(void **state)
{
    (void)state;
    char *l = nsbox_egress_log_line(&spliced, 7);
    assert_string_equal(l, "{\"seq\":7,\"time\":\"2025-12-06T05:46:40.123Z\",\"name\":"
                           "\"api.example.com\",\"port\":443,\"verdict\":\"spliced\","
                           "\"address\":\"198.51.100.10\",\"bytes_up\":517,\"bytes_down\":4096,"
                           "\"duration_ms\":42}");
    free(l);
    /* the bound path's fields: the query, which may hold a token, is never written */
    struct nsbox_egress_entry b = {.start_ms = 0,
                                   .name = "api.github.com",
                                   .port = 443,
                                   .verdict = "bound",
                                   .method = "GET",
                                   .path = "/repos/x?access_token=SECRET#frag",
                                   .status = 200};
    l = nsbox_egress_log_line(&b, 1);
    assert_non_null(strstr(l, "\"method\":\"GET\",\"path\":\"/repos/x\",\"status\":200"));
    assert_null(strstr(l, "SECRET"));
    free(l);
    /* a reason with quotes and control bytes stays one JSON line */
    struct nsbox_egress_entry r = {.verdict = "refused", .reason = "bad \"x\"\n\x01", .port = 1};
    l = nsbox_egress_log_line(&r, 2);
    assert_null(strchr(l, '\n'));
    assert_non_null(strstr(l, "\"reason\":\"bad \\\"x\\\"\\n\\u0001\""));
    free(l);
}

/* Each test's directory, its writer (the files made), and a reader opened by the test. */
struct fx {
    char *d;
    struct nsbox_egress_log l;
    struct nsbox_egress_reader r;
    struct seen s;
};

static int fx_setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->d = tmpdir();
    assert_int_equal(nsbox_egress_log_open(&f->l, f->d), 0);
    f->r.fd = f->r.older_fd = -1;
    f->s.ordered = true;
    *state = f;
    return 0;
}

static int fx_teardown(void **state)
{
    struct fx *f = *state;
    nsbox_egress_reader_close(&f->r);
    nsbox_egress_log_close(&f->l);
    rmdir_all(f->d);
    free(f);
    return 0;
}

static void fx_read(struct fx *f)
{
    assert_int_equal(nsbox_egress_reader_open(&f->r, f->d), 0);
}

/* Far more than the bound is written; both files stay under it, and a reader sees the newest
 * entries in order, each once, ending with the last one written. */
static void test_bounded_and_read_in_order(void **state)
{
    struct fx *f = *state;
    /* a follower that read the start, and reads on after many rotations' worth */
    struct nsbox_egress_reader early;
    assert_int_equal(nsbox_egress_reader_open(&early, f->d), 0);
    struct seen e1 = {.ordered = true};
    const int n = 20000; /* ~3 MB of lines: several rotations */
    for (int i = 0; i < n; i++) {
        nsbox_egress_log_write(&f->l, &spliced);
        if (i == 100)
            assert_int_equal(nsbox_egress_reader_next(&early, count_line, &e1), 101);
    }
    for (const char *name = NSBOX_EGRESS_LOG_FILE;; name = NSBOX_EGRESS_LOG_OLDER) {
        char p[512];
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", f->d, name);
        assert_int_equal(stat(p, &st), 0);
        assert_true(st.st_size <= NSBOX_EGRESS_LOG_ROTATE_BYTES);
        assert_int_equal(st.st_mode & 0777, 0600);
        if (!strcmp(name, NSBOX_EGRESS_LOG_OLDER))
            break;
    }
    fx_read(f);
    assert_true(nsbox_egress_reader_next(&f->r, count_line, &f->s) > 0);
    assert_true(f->s.ordered);
    assert_int_equal(f->s.last, (uint64_t)n);
    assert_true(f->s.count > 2000); /* both files: more than one file's worth */
    assert_false(f->r.dropped);
    /* the early follower: what was lost is said, what it gets is newer and in order */
    assert_true(nsbox_egress_reader_next(&early, count_line, &e1) > 0);
    assert_int_equal(e1.last, (uint64_t)n);
    assert_true(early.dropped);
    /* nothing new: nothing again */
    assert_int_equal(nsbox_egress_reader_next(&f->r, count_line, &f->s), 0);
    nsbox_egress_reader_close(&early);
}

/* A follower that reads between writes across a rotation gets every entry exactly once. */
static void test_follower_across_a_rotation(void **state)
{
    struct fx *f = *state;
    fx_read(f);
    const int n = 6000; /* about two rotations */
    for (int i = 0; i < n; i++) {
        nsbox_egress_log_write(&f->l, &spliced);
        if (i % 700 == 0)
            assert_true(nsbox_egress_reader_next(&f->r, count_line, &f->s) >= 0);
    }
    assert_true(nsbox_egress_reader_next(&f->r, count_line, &f->s) >= 0);
    assert_true(f->s.ordered);
    assert_int_equal(f->s.first, 1);
    assert_int_equal(f->s.count, (uint64_t)n);
    assert_false(f->r.dropped);
}

/* A reader that comes while the writer is between its copy and its emptying sees every entry
 * twice, in both files: each is passed on once. */
static void test_read_mid_rotation_passes_each_once(void **state)
{
    struct fx *f = *state;
    for (int i = 0; i < 10; i++)
        nsbox_egress_log_write(&f->l, &spliced);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cp %s/" NSBOX_EGRESS_LOG_FILE " %s/" NSBOX_EGRESS_LOG_OLDER, f->d,
             f->d);
    assert_int_equal(system(cmd), 0);
    fx_read(f);
    assert_int_equal(nsbox_egress_reader_next(&f->r, count_line, &f->s), 10);
    assert_true(f->s.ordered);
    assert_int_equal(f->s.first, 1);
}

/* Lines the writer did not make are not passed on: no seq, or a control byte (terminal
 * escapes for `nsbox logs` to print, C1's too) or any byte past ASCII. */
static void test_foreign_lines_are_dropped(void **state)
{
    struct fx *f = *state;
    char p[512];
    snprintf(p, sizeof p, "%s/" NSBOX_EGRESS_LOG_FILE, f->d);
    FILE *file = fopen(p, "w");
    assert_non_null(file);
    fputs("{\"seq\":1,\"name\":\"a\"}\n"
          "not json\n"
          "{\"seq\":2,\"name\":\"\x1b]0;pwned\x07\"}\n"
          "{\"seq\":3,\"name\":\"c\"}\n"
          "{\"seq\":4,\"name\":\"\xc2\x9b" "2J\"}\n" /* C1 CSI as UTF-8 */
          "{\"seq\":5,\"name\":\"\x9b" "2J\"}\n"     /* ... and raw */
          "{\"seq\":6,\"name\":\"\x7f\"}\n",
          file);
    fclose(file);
    fx_read(f);
    assert_int_equal(nsbox_egress_reader_next(&f->r, count_line, &f->s), 2);
    assert_int_equal(f->s.first, 1);
    assert_int_equal(f->s.last, 3);
}

static void test_no_log_is_enoent(void **state)
{
    (void)state;
    char *d = tmpdir();
    struct nsbox_egress_reader r;
    errno = 0;
    assert_int_equal(nsbox_egress_reader_open(&r, d), -1);
    assert_int_equal(errno, ENOENT);
    rmdir_all(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_line_fields),
        cmocka_unit_test_setup_teardown(test_bounded_and_read_in_order, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_follower_across_a_rotation, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_read_mid_rotation_passes_each_once, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_foreign_lines_are_dropped, fx_setup, fx_teardown),
        cmocka_unit_test(test_no_log_is_enoent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
