/* Images (rootfs/image*.c): the pure parts (names, apt sources, os-release, passwd/group,
 * host staleness) and, in a private NSBOX_DATA_DIR, the store itself: the host image build,
 * resolve, rm, leftovers of dead builds, and directory images. No root needed. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "image.h"
#include "paths.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* snprintf that fails the test instead of truncating a path */
#define JOIN(buf, ...) assert_true(snprintf((buf), sizeof(buf), __VA_ARGS__) < (int)sizeof(buf))

/* ---- names --------------------------------------------------------------------------------- */

static void test_name_valid(void **state)
{
    (void)state;
    const char *good[] = {"host", "debian", "my-img_1.0", "0abc", "a"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        assert_true(nsbox_image_name_valid(good[i]));
    char longest[NSBOX_IMAGE_NAME_MAX + 1], toolong[NSBOX_IMAGE_NAME_MAX + 2];
    memset(longest, 'a', sizeof longest - 1);
    longest[sizeof longest - 1] = '\0';
    memset(toolong, 'a', sizeof toolong - 1);
    toolong[sizeof toolong - 1] = '\0';
    assert_true(nsbox_image_name_valid(longest));
    const char *bad[] = {"", ".tmp-host-1", ".lock-host", "Debian", "a/b", "../x", "..", "x y",
                         "-x", "_x", "/abs", "a\nb", "caf\xc3\xa9", toolong};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_false(nsbox_image_name_valid(bad[i]));
    assert_false(nsbox_image_name_valid(NULL));
}

/* ---- apt sources --------------------------------------------------------------------------- */

static struct nsbox_mirror_pick pick_list(const char *text, const char *suite)
{
    struct nsbox_mirror_pick p = {.uri = "", .exact = false};
    nsbox_image_debian_pick_from_list(text, suite, &p);
    return p;
}

static struct nsbox_mirror_pick pick_sources(const char *text, const char *suite)
{
    struct nsbox_mirror_pick p = {.uri = "", .exact = false};
    nsbox_image_debian_pick_from_sources(text, suite, &p);
    return p;
}

static void test_apt_list_basic(void **state)
{
    (void)state;
    struct nsbox_mirror_pick p = pick_list("deb http://a.example/debian bookworm main\n", "bookworm");
    assert_string_equal(p.uri, "http://a.example/debian");
    assert_true(p.exact);
    /* no trailing newline, tabs, leading blanks */
    p = pick_list("  deb\thttps://b.example/debian\tbookworm main contrib", "bookworm");
    assert_string_equal(p.uri, "https://b.example/debian");
}

static void test_apt_list_comments_src_options(void **state)
{
    (void)state;
    const char *text = "# deb http://commented.example/debian bookworm main\n"
                       "#deb http://commented2.example/debian bookworm main\n"
                       "\n"
                       "deb-src http://src.example/debian bookworm main\n"
                       "deb [arch=amd64 signed-by=/usr/share/keyrings/k.gpg] "
                       "http://opt.example/debian bookworm main # trailing comment\n"
                       "deb http://later.example/debian bookworm main\n";
    struct nsbox_mirror_pick p = pick_list(text, "bookworm");
    assert_string_equal(p.uri, "http://opt.example/debian");
    assert_true(p.exact);

    /* options split over several tokens by blanks */
    p = pick_list("deb [ arch=amd64 trusted=yes ] http://sp.example/debian bookworm main\n",
                  "bookworm");
    assert_string_equal(p.uri, "http://sp.example/debian");

    /* options that never close: nothing usable on that line */
    p = pick_list("deb [arch=amd64 http://broken.example/debian bookworm main\n", "bookworm");
    assert_string_equal(p.uri, "");
}

static void test_apt_list_prefers_exact_suite(void **state)
{
    (void)state;
    /* the security archive listed first cannot bootstrap a system; the main one can */
    const char *text = "deb http://security.example/debian-security bookworm-security main\n"
                       "deb http://main.example/debian bookworm main\n"
                       "deb http://second.example/debian bookworm main\n";
    struct nsbox_mirror_pick p = pick_list(text, "bookworm");
    assert_string_equal(p.uri, "http://main.example/debian");
    assert_true(p.exact);

    /* only other suites: the first deb URI is the fallback */
    p = pick_list("deb http://security.example/debian-security bookworm-security main\n"
                  "deb http://upd.example/debian bookworm-updates main\n",
                  "bookworm");
    assert_string_equal(p.uri, "http://security.example/debian-security");
    assert_false(p.exact);
}

static void test_apt_list_unusable_schemes(void **state)
{
    (void)state;
    const char *text = "deb cdrom:[Debian GNU/Linux 12]/ bookworm main\n"
                       "deb mirror+file:/etc/apt/mirrors.txt bookworm main\n"
                       "deb tor+http://onion.example/debian bookworm main\n";
    assert_string_equal(pick_list(text, "bookworm").uri, "");
    struct nsbox_mirror_pick p =
        pick_list("deb file:/srv/mirror/debian bookworm main\n", "bookworm");
    assert_string_equal(p.uri, "file:/srv/mirror/debian");
}

/* This machine's own file, as shipped by the Debian cloud images: a comment inside a stanza. */
static const char host_like_sources[] =
    "Types: deb\n"
    "# http://snapshot.debian.org/archive/debian/20250520T000000Z\n"
    "URIs: http://deb.debian.org/debian\n"
    "Suites: bookworm bookworm-updates\n"
    "Components: main\n"
    "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
    "\n"
    "Types: deb\n"
    "# http://snapshot.debian.org/archive/debian-security/20250520T000000Z\n"
    "URIs: http://deb.debian.org/debian-security\n"
    "Suites: bookworm-security\n"
    "Components: main\n"
    "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n";

static void test_apt_sources_deb822(void **state)
{
    (void)state;
    struct nsbox_mirror_pick p = pick_sources(host_like_sources, "bookworm");
    assert_string_equal(p.uri, "http://deb.debian.org/debian");
    assert_true(p.exact);

    /* security stanza first, several URIs: the first URI of the exact stanza */
    p = pick_sources("Types: deb\nURIs: http://sec.example/debian-security\n"
                     "Suites: bookworm-security\n\n"
                     "Types: deb deb-src\nURIs: http://one.example/debian http://two.example/d\n"
                     "Suites: bookworm\n",
                     "bookworm");
    assert_string_equal(p.uri, "http://one.example/debian");
    assert_true(p.exact);
}

static void test_apt_sources_folded_and_case(void **state)
{
    (void)state;
    /* URIs continued on the next lines; field names in another case */
    struct nsbox_mirror_pick p = pick_sources("types: deb\n"
                                              "uris:\n"
                                              " cdrom:[x]/\n"
                                              " http://folded.example/debian\n"
                                              "suites: trixie\n",
                                              "trixie");
    assert_string_equal(p.uri, "http://folded.example/debian");
    assert_true(p.exact);
}

static void test_apt_sources_ignored_stanzas(void **state)
{
    (void)state;
    const char *text = "Types: deb-src\n"
                       "URIs: http://src.example/debian\n"
                       "Suites: bookworm\n"
                       "\n"
                       "Enabled: no\n"
                       "Types: deb\n"
                       "URIs: http://disabled.example/debian\n"
                       "Suites: bookworm\n"
                       "\n"
                       "# Types: deb\n"
                       "# URIs: http://commented.example/debian\n"
                       "\n"
                       "Types: deb\n"
                       "URIs: http://good.example/debian\n"
                       "Suites: bookworm\n"
                       "Enabled: yes\n";
    struct nsbox_mirror_pick p = pick_sources(text, "bookworm");
    assert_string_equal(p.uri, "http://good.example/debian");
    assert_string_equal(pick_sources("Types: deb-src\nURIs: http://s.example/\nSuites: x\n", "x")
                            .uri,
                        "");
}

static void test_apt_pick_across_files(void **state)
{
    (void)state;
    /* sources.list first, then sources.list.d/: an earlier exact match stays */
    struct nsbox_mirror_pick p = {.uri = "", .exact = false};
    nsbox_image_debian_pick_from_list("deb http://first.example/debian bookworm main\n", "bookworm",
                                      &p);
    nsbox_image_debian_pick_from_sources(host_like_sources, "bookworm", &p);
    assert_string_equal(p.uri, "http://first.example/debian");
    /* an earlier fallback gives way to a later exact match */
    struct nsbox_mirror_pick q = {.uri = "", .exact = false};
    nsbox_image_debian_pick_from_list("deb http://sec.example/s bookworm-security main\n",
                                      "bookworm", &q);
    nsbox_image_debian_pick_from_sources(host_like_sources, "bookworm", &q);
    assert_string_equal(q.uri, "http://deb.debian.org/debian");
}

static void test_apt_file_kind(void **state)
{
    (void)state;
    assert_int_equal(nsbox_image_debian_file_kind("debian.sources"), NSBOX_APT_FILE_SOURCES);
    assert_int_equal(nsbox_image_debian_file_kind("google-cloud-sdk.list"), NSBOX_APT_FILE_LIST);
    assert_int_equal(nsbox_image_debian_file_kind("my_repo.v2.list"), NSBOX_APT_FILE_LIST);
    const char *ignored[] = {"google-cloud-sdk.list.disabled-by-farm",
                             "nodesource.sources.disabled-by-farm",
                             "x.list.save",
                             "x.list~",
                             "x~.list",
                             ".hidden.list",
                             "a b.list",
                             ".list",
                             "sources",
                             "README",
                             "x.sources.dpkg-old"};
    for (size_t i = 0; i < sizeof ignored / sizeof ignored[0]; i++)
        assert_int_equal(nsbox_image_debian_file_kind(ignored[i]), NSBOX_APT_FILE_IGNORE);
}

/* ---- os-release ---------------------------------------------------------------------------- */

static void test_os_release_codename(void **state)
{
    (void)state;
    char out[64];
    assert_int_equal(nsbox_image_debian_codename("PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n"
                                                 "VERSION_ID=\"12\"\n"
                                                 "VERSION_CODENAME=bookworm\n"
                                                 "ID=debian\n",
                                                 out, sizeof out),
                     0);
    assert_string_equal(out, "bookworm");
    assert_int_equal(nsbox_image_debian_codename("VERSION_CODENAME=\"noble\"", out, sizeof out), 0);
    assert_string_equal(out, "noble");
    assert_int_equal(
        nsbox_image_debian_codename("ID=x\nVERSION_CODENAME='trixie'  \n", out, sizeof out), 0);
    assert_string_equal(out, "trixie");
    /* absent, empty, or only lookalike keys */
    assert_int_equal(
        nsbox_image_debian_codename("ID=debian\nPRETTY_NAME=\"sid\"\n", out, sizeof out), -1);
    assert_int_equal(nsbox_image_debian_codename("VERSION_CODENAME=\n", out, sizeof out), -1);
    assert_int_equal(nsbox_image_debian_codename("VERSION_CODENAME=\"\"\n", out, sizeof out), -1);
    assert_int_equal(nsbox_image_debian_codename("UBUNTU_CODENAME=jammy\n#VERSION_CODENAME=x\n"
                                                 " VERSION_CODENAME=y\n",
                                                 out, sizeof out),
                     -1);
    char small[4];
    assert_int_equal(
        nsbox_image_debian_codename("VERSION_CODENAME=bookworm\n", small, sizeof small), -1);
}

/* ---- passwd and group ---------------------------------------------------------------------- */

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void test_passwd_generate(void **state)
{
    (void)state;
    char *p = nsbox_image_passwd_generate("/bin/bash");
    assert_non_null(p);
    assert_non_null(strstr(p, "root:x:0:0:root:/root:/bin/bash\n"));
    assert_non_null(strstr(p, "appuser:x:1000:1000:nsbox sandbox user:/workspace:/bin/bash\n"));
    assert_non_null(strstr(p, "nobody:x:65534:65534:"));
    /* the system users an ordinary Debian has, root first (CPython's test_os chowns to the
     * first two users of the file and expects EPERM: both must be mapped ids) */
    assert_true(strncmp(p, "root:x:0:0:", 11) == 0);
    assert_non_null(strstr(p, "\ndaemon:x:1:1:"));
    assert_non_null(strstr(p, "\nbin:x:2:2:"));
    assert_non_null(strstr(p, "\nsys:x:3:3:"));
    assert_non_null(strstr(p, "\nwww-data:x:33:33:"));
    assert_int_equal(count_lines(p), 18);
    assert_null(strstr(p, "::::")); /* every field filled as passwd(5) wants */
    free(p);

    char *g = nsbox_image_group_generate();
    assert_non_null(g);
    assert_true(strncmp(g, "root:x:0:\n", 10) == 0);
    assert_non_null(strstr(g, "\nappuser:x:1000:\n"));
    assert_non_null(strstr(g, "\nnogroup:x:65534:\n"));
    assert_non_null(strstr(g, "\ntty:x:5:\n"));
    assert_non_null(strstr(g, "\ndaemon:x:1:\n"));
    assert_non_null(strstr(g, "\nadm:x:4:\n"));
    assert_non_null(strstr(g, "\nstaff:x:50:\n"));
    assert_non_null(strstr(g, "\nusers:x:100:\n"));
    free(g);
}

static void test_passwd_add_appuser(void **state)
{
    (void)state;
    /* an existing appuser with another uid, and another user squatting uid 1000: both go */
    const char *in = "root:x:0:0:root:/root:/bin/bash\n"
                     "appuser:x:2000:2000::/home/appuser:/bin/sh\n"
                     "squatter:x:1000:1000::/home/s:/bin/sh\n"
                     "user10000:x:10000:10000::/:/bin/sh\n"
                     "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin";
    char *out = nsbox_image_passwd_add_appuser(in, "/bin/sh");
    assert_non_null(out);
    assert_string_equal(out, "root:x:0:0:root:/root:/bin/bash\n"
                             "user10000:x:10000:10000::/:/bin/sh\n"
                             "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
                             "appuser:x:1000:1000:nsbox sandbox user:/workspace:/bin/sh\n");
    free(out);
    /* idempotent: adding again changes nothing */
    char *once = nsbox_image_passwd_add_appuser("root:x:0:0::/root:/bin/sh\n", "/bin/sh");
    char *twice = nsbox_image_passwd_add_appuser(once, "/bin/sh");
    assert_string_equal(once, twice);
    free(once);
    free(twice);
    out = nsbox_image_passwd_add_appuser("", "/bin/sh");
    assert_string_equal(out, "appuser:x:1000:1000:nsbox sandbox user:/workspace:/bin/sh\n");
    free(out);

    out = nsbox_image_group_add_appuser("root:x:0:\nappuser:x:5:\nstaff:x:1000:a,b\nusers:x:100:"
                                        "\n\n");
    assert_string_equal(out, "root:x:0:\nusers:x:100:\nappuser:x:1000:\n");
    free(out);
}

/* ---- host staleness ------------------------------------------------------------------------ */

static struct nsbox_host_probe sample_probe(void)
{
    struct nsbox_host_probe p;
    memset(&p, 0, sizeof p);
    for (int i = 0; i < NSBOX_HOST_SRC_COUNT; i++) {
        p.src[i].present = true;
        p.src[i].dev = 0x801;
        p.src[i].ino = 1000 + (ino_t)i;
        p.src[i].mtime.tv_sec = 1700000000 + i;
        p.src[i].mtime.tv_nsec = 123456789;
    }
    return p;
}

static void test_host_staleness(void **state)
{
    (void)state;
    struct nsbox_host_probe p = sample_probe();
    char stamp[256];
    assert_true(nsbox_image_host_stamp(&p, stamp, sizeof stamp) > 0);
    char want_prefix[16];
    snprintf(want_prefix, sizeof want_prefix, "v%d:", NSBOX_IMAGE_BUILDER_VERSION);
    assert_true(strncmp(stamp, want_prefix, strlen(want_prefix)) == 0);

    assert_false(nsbox_image_host_stale(stamp, &p));
    assert_true(nsbox_image_host_stale(NULL, &p)); /* never built */
    assert_true(nsbox_image_host_stale("", &p));
    assert_true(nsbox_image_host_stale("garbage", &p));

    struct nsbox_host_probe q = p;
    q.src[NSBOX_HOST_SRC_LDCACHE].mtime.tv_nsec++; /* ldconfig ran within the same second */
    assert_true(nsbox_image_host_stale(stamp, &q));
    q = p;
    q.src[NSBOX_HOST_SRC_ALTERNATIVES].mtime.tv_sec++;
    assert_true(nsbox_image_host_stale(stamp, &q));
    q = p;
    q.src[NSBOX_HOST_SRC_CERTS].ino++; /* replaced with the same mtime (cp -p) */
    assert_true(nsbox_image_host_stale(stamp, &q));
    q = p;
    q.src[NSBOX_HOST_SRC_ALTERNATIVES].present = false; /* removed */
    assert_true(nsbox_image_host_stale(stamp, &q));
    char stamp2[256];
    assert_true(nsbox_image_host_stamp(&q, stamp2, sizeof stamp2) > 0);
    assert_false(nsbox_image_host_stale(stamp2, &q)); /* absent sources are recorded too */
    assert_true(nsbox_image_host_stale(stamp2, &p));

    /* an older builder's stamp with the same host state is stale */
    char old[300];
    JOIN(old, "v%d%s", NSBOX_IMAGE_BUILDER_VERSION - 1, strchr(stamp, ':'));
    assert_true(nsbox_image_host_stale(old, &p));

    char tiny[8];
    assert_int_equal(nsbox_image_host_stamp(&p, tiny, sizeof tiny), -1);
}

/* ---- the store, in a private data directory ------------------------------------------------ */

struct store {
    char data[PATH_MAX];
    char images[PATH_MAX];
};

static int store_setup(void **state)
{
    struct store *s = calloc(1, sizeof *s);
    JOIN(s->data, "/tmp/nsbox-test-image-XXXXXX");
    if (!mkdtemp(s->data))
        return -1;
    JOIN(s->images, "%s/images", s->data);
    setenv("NSBOX_DATA_DIR", s->data, 1);
    *state = s;
    return 0;
}

static int store_teardown(void **state)
{
    struct store *s = *state;
    struct nsbox_err e;
    nsbox_paths_rm_rf(s->data, &e);
    unsetenv("NSBOX_DATA_DIR");
    free(s);
    return 0;
}

static bool exists(const char *dir, const char *rel)
{
    char p[PATH_MAX * 2];
    JOIN(p, "%s/%s", dir, rel);
    struct stat st;
    return lstat(p, &st) == 0;
}

static ino_t ino_of(const char *dir, const char *rel)
{
    char p[PATH_MAX * 2];
    JOIN(p, "%s/%s", dir, rel);
    struct stat st;
    return lstat(p, &st) == 0 ? st.st_ino : 0;
}

static int count_prefixed(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        n += strncmp(de->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

static char *slurp(const char *dir, const char *rel)
{
    char p[PATH_MAX * 2];
    JOIN(p, "%s/%s", dir, rel);
    FILE *f = fopen(p, "r");
    if (!f)
        return NULL;
    char *buf = calloc(1, 1 << 16);
    size_t n = fread(buf, 1, (1 << 16) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void test_host_resolve_builds_and_reuses(void **state)
{
    struct store *s = *state;
    struct nsbox_err e = {0};
    struct nsbox_image img;
    assert_int_equal(nsbox_image_resolve("host", &img, &e), 0);
    assert_int_equal(img.kind, NSBOX_IMAGE_HOST);
    assert_string_equal(img.root, "/");
    char want_etc[PATH_MAX * 2];
    JOIN(want_etc, "%s/host/etc", s->images);
    assert_string_equal(img.etc, want_etc);
    assert_true(img.lock_fd >= 0);

    assert_true(exists(img.etc, "passwd"));
    assert_true(exists(img.etc, "group"));
    assert_true(exists(img.etc, "nsswitch.conf"));
    assert_false(exists(img.etc, "shadow"));
    assert_false(exists(img.etc, "gshadow"));
    assert_false(exists(img.etc, "sudoers"));
    assert_false(exists(img.etc, "machine-id"));
    assert_false(exists(img.etc, "hostname"));
    assert_false(exists(img.etc, "ssh"));
    assert_false(exists(img.etc, "ssl/private"));
    assert_false(exists(img.etc, "environment"));
    if (access("/etc/ld.so.cache", R_OK) == 0)
        assert_true(exists(img.etc, "ld.so.cache"));
    char *pw = slurp(img.etc, "passwd");
    assert_non_null(pw);
    assert_non_null(strstr(pw, "\nappuser:x:1000:1000:"));
    free(pw);
    struct stat st;
    char p[PATH_MAX * 2];
    JOIN(p, "%s/passwd", img.etc);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0644);
    assert_int_equal(stat(img.etc, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0755);
    assert_int_equal(count_prefixed(s->images, ".tmp-"), 0);

    /* fresh: the second resolve reuses the same tree */
    ino_t before = ino_of(s->images, "host");
    struct nsbox_image img2;
    assert_int_equal(nsbox_image_resolve("host", &img2, &e), 0);
    assert_int_equal(ino_of(s->images, "host"), before);
    nsbox_image_release(&img2);
    nsbox_image_release(&img2); /* twice is fine */
    assert_int_equal(img2.lock_fd, -1);
    nsbox_image_release(&img);

    /* a stamp from another builder version (or another host state) triggers a rebuild */
    char stamp[PATH_MAX * 2];
    JOIN(stamp, "%s/host/stamp", s->images);
    assert_int_equal(unlink(stamp), 0);
    assert_int_equal(symlink("v0:-:-:-", stamp), 0);
    assert_int_equal(nsbox_image_resolve("host", &img, &e), 0);
    assert_true(ino_of(s->images, "host") != before);
    assert_int_equal(count_prefixed(s->images, ".tmp-"), 0);
    assert_int_equal(count_prefixed(s->images, ".old-"), 0); /* nobody held the old one */
    nsbox_image_release(&img);
}

static void test_host_resolve_cost(void **state)
{
    (void)state;
    struct nsbox_err e = {0};
    struct nsbox_image img;
    assert_int_equal(nsbox_image_resolve("host", &img, &e), 0); /* build outside the timing */
    nsbox_image_release(&img);
    enum { N = 5000 };
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < N; i++) {
        assert_int_equal(nsbox_image_resolve("host", &img, &e), 0);
        nsbox_image_release(&img);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double us = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) /
                1e3 / N;
    print_message("host resolve (fresh): %.2f us per call (open+flock+fstat+stat of the image "
                  "dir, readlink of the stamp, 3 stats of host files)\n",
                  us);
    /* generous bound so a loaded CI machine does not flake; the number above is the result */
    assert_true(us < 500.0);
}

static void test_rm_and_in_use(void **state)
{
    struct store *s = *state;
    struct nsbox_err e = {0};
    struct nsbox_image img;
    assert_int_equal(nsbox_image_resolve("host", &img, &e), 0);

    /* rm while a "sandbox" holds the image: the name goes, the files stay until released */
    assert_int_equal(nsbox_image_remove("host", false, &e), 0);
    assert_false(exists(s->images, "host"));
    assert_int_equal(count_prefixed(s->images, ".old-host-"), 1);
    nsbox_image_release(&img);

    assert_int_equal(nsbox_image_remove("host", false, &e), -1);
    assert_int_equal(e.code, NSBOX_E_NOTFOUND);
    assert_non_null(strstr(e.msg, "'host' does not exist"));
    assert_int_equal(nsbox_image_remove("host", true, &e), 0);
    assert_int_equal(count_prefixed(s->images, ".old-"), 0); /* swept once unused */

    assert_int_equal(nsbox_image_remove("../x", true, &e), -1);
    assert_int_equal(e.code, NSBOX_E_INVALID);
    assert_int_equal(nsbox_image_remove("/etc", true, &e), -1);
    assert_int_equal(e.code, NSBOX_E_INVALID);
}

static void test_rebuild_while_in_use(void **state)
{
    struct store *s = *state;
    struct nsbox_err e = {0};
    struct nsbox_image img;
    assert_int_equal(nsbox_image_resolve("host", &img, &e), 0);
    char held_passwd[PATH_MAX * 2];
    ino_t held = ino_of(s->images, "host");
    assert_int_equal(nsbox_image_build("host", false, &e), 0);
    assert_true(ino_of(s->images, "host") != held);
    /* the tree the sandbox mounted still has its files */
    assert_int_equal(count_prefixed(s->images, ".old-host-"), 1);
    DIR *d = opendir(s->images);
    struct dirent *de;
    held_passwd[0] = '\0';
    while ((de = readdir(d)))
        if (!strncmp(de->d_name, ".old-host-", 10))
            JOIN(held_passwd, "%s/%s/etc/passwd", s->images, de->d_name);
    closedir(d);
    assert_int_equal(access(held_passwd, R_OK), 0);
    nsbox_image_release(&img);
    assert_int_equal(nsbox_image_build("host", false, &e), 0);
    assert_int_equal(count_prefixed(s->images, ".old-"), 0);
}

/* Above PID_MAX_LIMIT (2^22): no process can ever have this pid. */
#define NEVER_A_PID ((1 << 22) + 1)

static void test_leftovers_swept(void **state)
{
    struct store *s = *state;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_paths_mkdir_p(s->images, 0755, &e), 0);
    pid_t dead = NEVER_A_PID;
    char dead_tmp[PATH_MAX * 2], live_tmp[PATH_MAX * 2], f[PATH_MAX * 3];
    JOIN(dead_tmp, "%s/.tmp-debian-%d", s->images, (int)dead);
    snprintf(live_tmp, sizeof live_tmp, "%s/.tmp-debian-1", s->images); /* pid 1 is alive */
    assert_int_equal(nsbox_paths_mkdir_p(dead_tmp, 0755, &e), 0);
    assert_int_equal(nsbox_paths_mkdir_p(live_tmp, 0755, &e), 0);
    JOIN(f, "%s/rootfs-half-written", dead_tmp);
    FILE *fp = fopen(f, "w");
    fputs("x", fp);
    fclose(fp);

    assert_int_equal(nsbox_image_build("host", false, &e), 0);
    assert_false(exists(dead_tmp, ""));
    assert_true(exists(live_tmp, ""));
    assert_int_equal(rmdir(live_tmp), 0);
}

static void test_resolve_errors(void **state)
{
    (void)state;
    struct nsbox_err e = {0};
    struct nsbox_image img;
    assert_int_equal(nsbox_image_resolve("debian", &img, &e), -1);
    assert_int_equal(e.code, NSBOX_E_NOTFOUND);
    assert_string_equal(e.msg, "image 'debian' is not built: run `nsbox image build debian`");
    assert_int_equal(img.lock_fd, -1);

    assert_int_equal(nsbox_image_resolve("mine", &img, &e), -1);
    assert_int_equal(e.code, NSBOX_E_NOTFOUND);

    /* a reference (docker.io/rel/dir:latest) that the store does not have */
    assert_int_equal(nsbox_image_resolve("rel/dir", &img, &e), -1);
    assert_int_equal(e.code, NSBOX_E_NOTFOUND);
    const char *bad[] = {"rel//dir", "./x", "..", "", "Host"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(nsbox_image_resolve(bad[i], &img, &e), -1);
        assert_int_equal(e.code, NSBOX_E_INVALID);
    }
    assert_int_equal(nsbox_image_build("ubuntu", false, &e), -1);
    assert_int_equal(e.code, NSBOX_E_INVALID);
}

static void write_exec(const char *path)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("#!/bin/true\n", f);
    fclose(f);
    assert_int_equal(chmod(path, 0755), 0);
}

static void test_dir_image(void **state)
{
    struct store *s = *state;
    struct nsbox_err e = {0};
    struct nsbox_image img;
    char root[PATH_MAX * 2], p[PATH_MAX * 3];
    JOIN(root, "%s/myroot", s->data);
    assert_int_equal(mkdir(root, 0755), 0);

    /* hostile: bin -> /usr/bin (absolute). Followed on the host it would find the host's sh;
     * inside the image it leads to the image's own (empty) /usr/bin. */
    JOIN(p, "%s/bin", root);
    assert_int_equal(symlink("/usr/bin", p), 0);
    assert_int_equal(nsbox_image_resolve(root, &img, &e), -1);
    assert_int_equal(e.code, NSBOX_E_INVALID);
    assert_non_null(strstr(e.msg, root));
    assert_non_null(strstr(e.msg, "bin/sh"));
    /* same with a relative climb out */
    assert_int_equal(unlink(p), 0);
    assert_int_equal(symlink("../../../../../../../../usr/bin", p), 0);
    assert_int_equal(nsbox_image_resolve(root, &img, &e), -1);

    /* the image's own /usr/bin/sh makes it valid, through the same symlink */
    JOIN(p, "%s/usr/bin", root);
    assert_int_equal(nsbox_paths_mkdir_p(p, 0755, &e), 0);
    JOIN(p, "%s/usr/bin/sh", root);
    write_exec(p);
    assert_int_equal(nsbox_image_resolve(root, &img, &e), 0);
    assert_int_equal(img.kind, NSBOX_IMAGE_DIR);
    assert_string_equal(img.root, root);
    assert_string_equal(img.etc, "");
    assert_int_equal(img.lock_fd, -1);

    /* not executable */
    assert_int_equal(chmod(p, 0644), 0);
    assert_int_equal(nsbox_image_resolve(root, &img, &e), -1);

    /* not a directory / missing */
    assert_int_equal(nsbox_image_resolve(p, &img, &e), -1);
    assert_int_equal(e.code, NSBOX_E_INVALID);
    JOIN(p, "%s/nonexistent", s->data);
    assert_int_equal(nsbox_image_resolve(p, &img, &e), -1);
    assert_int_equal(e.code, NSBOX_E_NOTFOUND);
    assert_non_null(strstr(e.msg, p));
}

static void test_stored_dir_image_and_list(void **state)
{
    struct store *s = *state;
    struct nsbox_err e = {0};
    struct nsbox_image img;
    char p[PATH_MAX * 2];
    /* an image placed in the store by hand: resolved by name, listed as kind "dir" */
    JOIN(p, "%s/mine/rootfs/bin", s->images);
    assert_int_equal(nsbox_paths_mkdir_p(p, 0755, &e), 0);
    JOIN(p, "%s/mine/rootfs/bin/sh", s->images);
    write_exec(p);
    assert_int_equal(nsbox_image_resolve("mine", &img, &e), 0);
    assert_int_equal(img.kind, NSBOX_IMAGE_DIR);
    assert_true(img.lock_fd >= 0);
    nsbox_image_release(&img);

    assert_int_equal(nsbox_image_build("host", false, &e), 0);
    struct nsbox_image_info *v = NULL;
    size_t n = 0;
    assert_int_equal(nsbox_image_list(&v, &n, &e), 0);
    assert_int_equal(n, 2);
    assert_string_equal(v[0].name, "host");
    assert_string_equal(v[0].kind, "host");
    assert_int_equal(v[0].builder_version, NSBOX_IMAGE_BUILDER_VERSION);
    assert_int_equal(strlen(v[0].created), 20);
    assert_string_equal(v[1].name, "mine");
    assert_string_equal(v[1].kind, "dir");
    free(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_name_valid),
        cmocka_unit_test(test_apt_list_basic),
        cmocka_unit_test(test_apt_list_comments_src_options),
        cmocka_unit_test(test_apt_list_prefers_exact_suite),
        cmocka_unit_test(test_apt_list_unusable_schemes),
        cmocka_unit_test(test_apt_sources_deb822),
        cmocka_unit_test(test_apt_sources_folded_and_case),
        cmocka_unit_test(test_apt_sources_ignored_stanzas),
        cmocka_unit_test(test_apt_pick_across_files),
        cmocka_unit_test(test_apt_file_kind),
        cmocka_unit_test(test_os_release_codename),
        cmocka_unit_test(test_passwd_generate),
        cmocka_unit_test(test_passwd_add_appuser),
        cmocka_unit_test(test_host_staleness),
        cmocka_unit_test_setup_teardown(test_host_resolve_builds_and_reuses, store_setup,
                                        store_teardown),
        cmocka_unit_test_setup_teardown(test_host_resolve_cost, store_setup, store_teardown),
        cmocka_unit_test_setup_teardown(test_rm_and_in_use, store_setup, store_teardown),
        cmocka_unit_test_setup_teardown(test_rebuild_while_in_use, store_setup, store_teardown),
        cmocka_unit_test_setup_teardown(test_leftovers_swept, store_setup, store_teardown),
        cmocka_unit_test_setup_teardown(test_resolve_errors, store_setup, store_teardown),
        cmocka_unit_test_setup_teardown(test_dir_image, store_setup, store_teardown),
        cmocka_unit_test_setup_teardown(test_stored_dir_image_and_list, store_setup,
                                        store_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
