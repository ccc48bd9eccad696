/* The sandbox's /sys (nsbox_mount_plan_add_sys, rootfs/mount_plan.c), pure: a read-only tmpfs
 * that holds only fs/cgroup, with the sandbox's own cgroup directories bound read-only there as
 * Docker lays them out (v2 at /sys/fs/cgroup, v1 one directory per hierarchy, a co-mounted
 * one's controllers as links), everything made before /sys is sealed; and nsbox-oci's config
 * cgroup mount (cfg->cgroup_views), the same directories in the config's order. The kernel's
 * side (the writes, mkdirs and remounts refused inside a real sandbox) is
 * tests/security/attack_cgview.c. */

#include "mounts_world.h"

static const uint64_t RO =
    MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;

/* over a whole image's plan, whose own /sys entry nsbox never shows */
static struct world *built(const struct nsbox_cgroup_view *v, size_t n)
{
    struct world *w = dir_world();
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_mount_plan_build(&w->cfg, &w->plan, &e), 0);
    if (nsbox_mount_plan_add_sys(&w->plan, v, n, &e) != 0)
        fail_msg("add_sys: %s", e.msg);
    return w;
}

/* /sys's tmpfs first, sealed last; every bind below it read-only, nosuid, nodev, noexec, of a
 * host path, on a directory made after the tmpfs; nothing else is bound or made under /sys. */
static void check_sys(const struct nsbox_mount_plan *p, size_t binds)
{
    int tmpfs = idx(p, NSBOX_MOP_TMPFS, "sys"), seal = idx(p, NSBOX_MOP_SETATTR, "sys");
    assert_true(idx(p, NSBOX_MOP_MKDIR, "sys") >= 0 && tmpfs > idx(p, NSBOX_MOP_MKDIR, "sys"));
    assert_true(p->ops[tmpfs].flags & MS_NOSUID && p->ops[tmpfs].flags & MS_NODEV &&
                p->ops[tmpfs].flags & MS_NOEXEC);
    assert_int_equal(seal, (int)p->n - 1);
    assert_int_equal(p->ops[seal].attr, RO);
    size_t seen = 0;
    for (size_t i = 0; i < p->n; i++) {
        const struct nsbox_mount_op *o = &p->ops[i];
        if (strncmp(o->target, "sys/", 4))
            continue;
        assert_true((int)i > tmpfs && (int)i < seal);
        assert_true(o->op == NSBOX_MOP_MKDIR || o->op == NSBOX_MOP_BIND ||
                    o->op == NSBOX_MOP_SYMLINK);
        if (o->op != NSBOX_MOP_BIND)
            continue;
        seen++;
        assert_int_equal(o->attr, RO);
        assert_false(o->recursive || o->src_in_image || o->late);
        assert_true(o->src[0] == '/');
        int made = idx(p, NSBOX_MOP_MKDIR, o->target);
        assert_true(made >= 0 && made < (int)i);
    }
    assert_int_equal(seen, binds);
}

static void test_v1_one_directory_per_hierarchy(void **state)
{
    (void)state;
    const struct nsbox_cgroup_view v[] = {{"memory", "/sys/fs/cgroup/memory/nsbox-a"},
                                          {"cpu,cpuacct", "/sys/fs/cgroup/cpu,cpuacct/nsbox-a"},
                                          {"pids", "/sys/fs/cgroup/pids/nsbox-a"}};
    struct world *w = built(v, 3);
    const struct nsbox_mount_plan *p = &w->plan;
    check_sys(p, 3);
    int b = idx(p, NSBOX_MOP_BIND, "sys/fs/cgroup/memory");
    assert_true(b >= 0);
    assert_string_equal(p->ops[b].src, "/sys/fs/cgroup/memory/nsbox-a");
    b = idx(p, NSBOX_MOP_BIND, "sys/fs/cgroup/cpu,cpuacct");
    assert_true(b >= 0);
    /* the co-mounted hierarchy's controllers by their own names, as the host has them */
    for (const char *const *c =
             (const char *const[]){"sys/fs/cgroup/cpu", "sys/fs/cgroup/cpuacct", NULL};
         *c; c++) {
        int l = idx(p, NSBOX_MOP_SYMLINK, *c);
        assert_true(l > b);
        assert_string_equal(p->ops[l].src, "cpu,cpuacct");
    }
    assert_int_equal(idx(p, NSBOX_MOP_BIND, "sys/fs/cgroup"), -1);
    free(w);
}

static void test_v2_at_sys_fs_cgroup(void **state)
{
    (void)state;
    const struct nsbox_cgroup_view v[] = {{NULL, "/sys/fs/cgroup/nsbox/nsbox-a"}};
    struct world *w = built(v, 1);
    check_sys(&w->plan, 1);
    int b = idx(&w->plan, NSBOX_MOP_BIND, "sys/fs/cgroup");
    assert_true(b >= 0);
    assert_string_equal(w->plan.ops[b].src, "/sys/fs/cgroup/nsbox/nsbox-a");
    free(w);
}

/* no cgroup: /sys is there, empty and read-only, with no fs/cgroup in it */
static void test_no_cgroup_empty_sys(void **state)
{
    (void)state;
    struct world *w = built(NULL, 0);
    check_sys(&w->plan, 0);
    assert_int_equal(idx(&w->plan, NSBOX_MOP_MKDIR, "sys/fs/cgroup"), -1);
    free(w);
}

/* a hierarchy's name is one entry: never a path that climbs out of /sys/fs/cgroup; v2's
 * directory goes alone */
static void test_bad_views_refused(void **state)
{
    (void)state;
    static const char *const bad[] = {"..", ".", "", "a/b", "../../etc"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct world *w = new_world(NSBOX_IMAGE_HOST);
        struct nsbox_err e = {0};
        assert_int_equal(nsbox_mount_plan_build(&w->cfg, &w->plan, &e), 0);
        const struct nsbox_cgroup_view v[] = {{bad[i], "/sys/fs/cgroup/memory/nsbox-a"}};
        assert_int_equal(nsbox_mount_plan_add_sys(&w->plan, v, 1, &e), -1);
        assert_int_equal(e.code, NSBOX_E_INVALID);
        free(w);
    }
    struct world *w = new_world(NSBOX_IMAGE_HOST);
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_mount_plan_build(&w->cfg, &w->plan, &e), 0);
    const struct nsbox_cgroup_view v[] = {{NULL, "/a"}, {"memory", "/b"}};
    assert_int_equal(nsbox_mount_plan_add_sys(&w->plan, v, 2, &e), -1);
    free(w);
}

/* /sys has room of its own: a plan the image filled to NSBOX_MOUNT_OPS_MAX still takes it
 * with the most hierarchies, each co-mounting two controllers (a link each), and more than its
 * room (a hierarchy more, a link more) is an error, never an overrun */
static void test_room_of_its_own(void **state)
{
    (void)state;
    enum { N = NSBOX_MOUNT_SYS_VIEWS_MAX };
    _Static_assert(2 * N == NSBOX_MOUNT_SYS_LINKS_MAX, "two links a hierarchy fill the room");
    static char names[N + 1][16];
    struct nsbox_cgroup_view v[N + 1];
    for (int i = 0; i <= N; i++) {
        snprintf(names[i], sizeof names[i], "a%d,b%d", i, i);
        v[i] = (struct nsbox_cgroup_view){names[i], "/h/nsbox-a"};
    }
    for (int over = 0; over < 3; over++) {
        struct world *w = dir_world();
        struct nsbox_err e = {0};
        assert_int_equal(nsbox_mount_plan_build(&w->cfg, &w->plan, &e), 0);
        assert_true(w->plan.n < NSBOX_MOUNT_OPS_MAX);
        w->plan.n = NSBOX_MOUNT_OPS_MAX; /* as a plan the image filled */
        snprintf(names[0], sizeof names[0], over == 2 ? "a0,b0,c0" : "a0,b0");
        int r = nsbox_mount_plan_add_sys(&w->plan, v, over == 1 ? N + 1 : N, &e);
        assert_true(w->plan.n <= NSBOX_MOUNT_PLAN_OPS);
        if (!over) {
            if (r != 0)
                fail_msg("/sys refused on a full plan: %s", e.msg);
            assert_int_equal(w->plan.n, NSBOX_MOUNT_PLAN_OPS);
        } else {
            assert_int_equal(r, -1);
            assert_int_equal(e.sys_errno, E2BIG);
        }
        free(w);
    }
}

/* nsbox-oci: a plan whose config mounts mounts (n of them) shows views there. */
static struct world *config_built(const struct nsbox_rootfs_mount *mounts, size_t n,
                                  const struct nsbox_cgroup_view *v, size_t nv)
{
    struct world *w = dir_world();
    w->cfg.mounts = mounts;
    w->cfg.n_mounts = n;
    w->cfg.cgroup_views = v;
    w->cfg.n_cgroup_views = nv;
    struct nsbox_err e = {0};
    if (nsbox_mount_plan_build(&w->cfg, &w->plan, &e) != 0)
        fail_msg("build: %s", e.msg);
    return w;
}

static const struct nsbox_cgroup_view v1_views[] = {
    {"memory", "/sys/fs/cgroup/memory/ctr"}, {"cpu,cpuacct", "/sys/fs/cgroup/cpu,cpuacct/ctr"}};
static const struct nsbox_rootfs_mount cgroup_mount = {
    "/sys/fs/cgroup", "cgroup", "cgroup", MS_RDONLY, false, false, "", {0}};

/* The config's cgroup mount, v1: a tmpfs of its own there, each hierarchy's directory made in
 * it and bound read-only, the links, then the tmpfs sealed read-only; nothing outside the
 * destination. */
static void test_config_cgroup_v1(void **state)
{
    (void)state;
    struct world *w = config_built(&cgroup_mount, 1, v1_views, 2);
    const struct nsbox_mount_plan *p = &w->plan;
    int tmpfs = idx(p, NSBOX_MOP_TMPFS, "sys/fs/cgroup");
    int seal = idx(p, NSBOX_MOP_SETATTR, "sys/fs/cgroup");
    assert_true(tmpfs >= 0 && tmpfs < seal);
    assert_int_equal(p->ops[seal].attr, RO);
    assert_true(p->ops[tmpfs].flags & MS_NOSUID && p->ops[tmpfs].flags & MS_NODEV &&
                p->ops[tmpfs].flags & MS_NOEXEC);
    int b = idx(p, NSBOX_MOP_BIND, "sys/fs/cgroup/memory");
    assert_true(b > idx(p, NSBOX_MOP_MKDIR, "sys/fs/cgroup/memory") && b < seal);
    assert_string_equal(p->ops[b].src, "/sys/fs/cgroup/memory/ctr");
    assert_int_equal(p->ops[b].attr, RO);
    assert_false(p->ops[b].late || p->ops[b].recursive || p->ops[b].src_in_image);
    assert_true(idx(p, NSBOX_MOP_SYMLINK, "sys/fs/cgroup/cpuacct") > tmpfs);
    for (size_t i = (size_t)tmpfs; i <= (size_t)seal; i++)
        assert_int_equal(strncmp(p->ops[i].target, "sys/fs/cgroup", 13), 0);
    free(w);
}

/* v2: the one directory bound read-only on the destination itself, no tmpfs nor seal; a
 * destination that is not a clean path is refused */
static void test_config_cgroup_v2_and_bad_destination(void **state)
{
    (void)state;
    const struct nsbox_cgroup_view v[] = {{NULL, "/sys/fs/cgroup/ctr"}};
    struct world *w = config_built(&cgroup_mount, 1, v, 1);
    const struct nsbox_mount_plan *p = &w->plan;
    int b = idx(p, NSBOX_MOP_BIND, "sys/fs/cgroup");
    assert_true(b >= 0);
    assert_string_equal(p->ops[b].src, "/sys/fs/cgroup/ctr");
    assert_int_equal(p->ops[b].attr, RO);
    assert_int_equal(count(p, NSBOX_MOP_TMPFS, "sys/fs/cgroup"), 0);
    assert_int_equal(count(p, NSBOX_MOP_SETATTR, "sys/fs/cgroup"), 0);
    free(w);
    const struct nsbox_rootfs_mount bad = {
        .destination = "/sys/../etc", .type = "cgroup", .source = "cgroup", .data = ""};
    w = dir_world();
    w->cfg.mounts = &bad;
    w->cfg.n_mounts = 1;
    w->cfg.cgroup_views = v;
    w->cfg.n_cgroup_views = 1;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_mount_plan_build(&w->cfg, &w->plan, &e), -1);
    assert_int_equal(e.code, NSBOX_E_INVALID);
    free(w);
}

/* The config's order: a later mount below the cgroup mount (Podman --systemd's bind of
 * /sys/fs/cgroup/systemd) comes after the views, its mount point made before the tmpfs is
 * sealed; one on the destination itself (docker -v /sys/fs/cgroup:/sys/fs/cgroup) goes over
 * them, after the seal, which so reaches the tmpfs, not the bind. Masks come after both. */
static void test_config_cgroup_in_order(void **state)
{
    (void)state;
    const char *const masked[] = {"/sys/fs/cgroup/memory/memory.stat"};
    const struct nsbox_rootfs_mount m[] = {
        cgroup_mount,
        {"/sys/fs/cgroup/systemd", "bind", "/srv/systemd", 0, false, false, "", {0}},
        {"/sys/fs/cgroup", "bind", "/srv/cgroup", MS_RDONLY, true, false, "", {0}},
    };
    struct world *w = dir_world();
    w->cfg.masked = masked;
    w->cfg.n_masked = 1;
    w->cfg.mounts = m;
    w->cfg.n_mounts = 3;
    w->cfg.cgroup_views = v1_views;
    w->cfg.n_cgroup_views = 2;
    struct nsbox_err e = {0};
    if (nsbox_mount_plan_build(&w->cfg, &w->plan, &e) != 0)
        fail_msg("build: %s", e.msg);
    const struct nsbox_mount_plan *p = &w->plan;
    int views = idx(p, NSBOX_MOP_BIND, "sys/fs/cgroup/memory");
    int sd_dir = idx(p, NSBOX_MOP_MKDIR, "sys/fs/cgroup/systemd");
    int sd = idx(p, NSBOX_MOP_BIND, "sys/fs/cgroup/systemd");
    int seal = idx(p, NSBOX_MOP_SETATTR, "sys/fs/cgroup");
    int over = idx(p, NSBOX_MOP_BIND, "sys/fs/cgroup");
    int mask = idx(p, NSBOX_MOP_MASK, "sys/fs/cgroup/memory/memory.stat");
    assert_true(views >= 0 && views < sd_dir && sd_dir < sd && sd < seal && seal < over &&
                over < mask);
    assert_int_equal(count(p, NSBOX_MOP_SETATTR, "sys/fs/cgroup"), 1);
    assert_string_equal(p->ops[over].src, "/srv/cgroup");
    free(w);
}

/* The config's cgroup mount takes room of its own wherever it is: with it first or last
 * among as many binds, a config fits, or is refused as too many operations, alike. */
static void test_config_cgroup_room_in_any_place(void **state)
{
    (void)state;
    enum { MAX = NSBOX_MOUNT_OPS_MAX + 2 };
    static char dest[MAX][16];
    static struct nsbox_rootfs_mount first[MAX + 1], last[MAX + 1];
    bool refused = false;
    for (size_t k = 1; k <= MAX && !refused; k++) {
        snprintf(dest[k - 1], sizeof dest[k - 1], "/b%zu", k);
        const struct nsbox_rootfs_mount bind = {
            .destination = dest[k - 1], .type = "bind", .source = "/srv/x", .data = ""};
        first[0] = cgroup_mount;
        for (size_t i = 0; i < k; i++) {
            first[i + 1] = bind;
            first[i + 1].destination = dest[i];
            last[i] = first[i + 1];
        }
        last[k] = cgroup_mount;
        int r[2];
        const struct nsbox_rootfs_mount *const order[2] = {first, last};
        for (int o = 0; o < 2; o++) {
            struct world *w = dir_world();
            w->cfg.mounts = order[o];
            w->cfg.n_mounts = k + 1;
            w->cfg.cgroup_views = v1_views;
            w->cfg.n_cgroup_views = 2;
            struct nsbox_err e = {0};
            r[o] = nsbox_mount_plan_build(&w->cfg, &w->plan, &e);
            assert_true(w->plan.n <= NSBOX_MOUNT_PLAN_OPS);
            if (r[o] < 0)
                assert_int_equal(e.sys_errno, E2BIG);
            free(w);
        }
        if (r[0] != r[1])
            fail_msg("%zu binds: %s with the cgroup mount first, %s with it last", k,
                     r[0] ? "refused" : "built", r[1] ? "refused" : "built");
        refused = r[0] < 0;
    }
    assert_true(refused); /* the room was reached */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_v1_one_directory_per_hierarchy),
        cmocka_unit_test(test_v2_at_sys_fs_cgroup),
        cmocka_unit_test(test_no_cgroup_empty_sys),
        cmocka_unit_test(test_bad_views_refused),
        cmocka_unit_test(test_room_of_its_own),
        cmocka_unit_test(test_config_cgroup_v1),
        cmocka_unit_test(test_config_cgroup_v2_and_bad_destination),
        cmocka_unit_test(test_config_cgroup_in_order),
        cmocka_unit_test(test_config_cgroup_room_in_any_place),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
