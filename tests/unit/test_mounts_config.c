/* The mount plan of an OCI bundle (rootfs/mounts.c, nsbox-oci): the config's mounts in its
 * order in place of nsbox's /proc and /dev, with nsbox's floor kept around them (device nodes
 * into the config's /dev, /proc masks last), mount points never in the image, what cannot be
 * mounted refused with the reason. */
#include "mounts_world.h"

static const struct nsbox_rootfs_mount runc_spec[] = {
    {"/proc", "proc", "proc", 0, false, false, "", {0}},
    {"/dev",
     "tmpfs",
     "tmpfs",
     MS_NOSUID | MS_STRICTATIME,
     false,
     false,
     "mode=755,size=65536k",
     {0}},
    {"/dev/pts",
     "devpts",
     "devpts",
     MS_NOSUID | MS_NOEXEC,
     false,
     false,
     "newinstance,ptmxmode=0666,mode=0620,gid=5",
     {0}},
    {"/dev/shm",
     "tmpfs",
     "shm",
     MS_NOSUID | MS_NOEXEC | MS_NODEV,
     false,
     false,
     "mode=1777,size=65536k",
     {0}},
    {"/dev/mqueue", "mqueue", "mqueue", MS_NOSUID | MS_NOEXEC | MS_NODEV, false, false, "", {0}},
    {"/sys", "sysfs", "sysfs", MS_NOSUID | MS_NOEXEC | MS_NODEV | MS_RDONLY, false, false, "", {0}},
    {"/sys/fs/cgroup", "cgroup", "cgroup", MS_RDONLY, false, false, "", {0}},
    {"/etc/hostname", "bind", "/run/ctr/hostname", MS_RDONLY, false, true, "", {0}},
    {"/data", "bind", "/srv/data", MS_NODEV, true, false, "", {0}},
};

static struct world *config_world(const struct nsbox_rootfs_mount *m, size_t n)
{
    struct world *w = dir_world();
    w->cfg.ws_kind = NSBOX_WS_TMPFS;
    w->cfg.ws_bytes = 1 << 30;
    w->cfg.mounts = m;
    w->cfg.n_mounts = n;
    return w;
}

static void test_config_order_and_floor(void **state)
{
    (void)state;
    struct world *w = config_world(runc_spec, sizeof runc_spec / sizeof runc_spec[0]);
    struct nsbox_err e = {0};
    if (nsbox_mount_plan_build(&w->cfg, &w->plan, &e) < 0)
        fail_msg("%s", e.msg);
    const struct nsbox_mount_plan *p = &w->plan;
    int proc = idx(p, NSBOX_MOP_PROC, "proc"), dev = idx(p, NSBOX_MOP_TMPFS, "dev");
    int pts = idx(p, NSBOX_MOP_DEVPTS, "dev/pts"), shm = idx(p, NSBOX_MOP_TMPFS, "dev/shm");
    int mq = idx(p, NSBOX_MOP_FS, "dev/mqueue"), sys = idx(p, NSBOX_MOP_FS, "sys");
    int host = idx(p, NSBOX_MOP_BIND, "etc/hostname");
    int data = idx(p, NSBOX_MOP_BIND, "data");
    /* the config's order */
    assert_true(proc >= 0 && proc < dev && dev < pts && pts < shm && shm < mq && mq < sys &&
                sys < host && host < data);
    /* one /proc and one /dev: the config's, not nsbox's as well */
    assert_int_equal(count(p, NSBOX_MOP_PROC, NULL), 1);
    assert_int_equal(count(p, NSBOX_MOP_DEVPTS, NULL), 1);
    /* the config's flags, data and source name */
    assert_int_equal(p->ops[dev].flags, MS_NOSUID | MS_STRICTATIME);
    assert_string_equal(p->ops[dev].data, "mode=755,size=65536k");
    assert_string_equal(p->ops[shm].src, "shm");
    assert_string_equal(p->ops[mq].fstype, "mqueue");
    assert_true(p->ops[sys].flags & MS_RDONLY);
    /* cgroup: no cgroup filesystem mounted for it (a user namespace is refused a cgroup2
     * mount on a v1 host), but the sandbox's own cgroup directories in their place, here none
     * (test_mounts_sys.c): an empty tmpfs, sealed read-only after the config's last mount */
    int cg = idx(p, NSBOX_MOP_TMPFS, "sys/fs/cgroup");
    int cg_seal = idx(p, NSBOX_MOP_SETATTR, "sys/fs/cgroup");
    assert_true(sys < cg && cg < host && data < cg_seal);
    for (size_t i = 0; i < p->n; i++)
        if (!strncmp(p->ops[i].target, "sys/fs/cgroup", 13))
            assert_true(p->ops[i].op == NSBOX_MOP_MKDIR || (int)i == cg || (int)i == cg_seal);
    /* nsbox's device nodes go into the config's /dev after it is mounted */
    int null = idx(p, NSBOX_MOP_BIND_DEV, "dev/null");
    assert_true(null > dev && null < pts);
    assert_int_equal(count(p, NSBOX_MOP_BIND_DEV, NULL), (int)list_len(nsbox_dev_nodes));
    /* nsbox's /proc masks, last */
    for (size_t i = (size_t)cg_seal + 1; i < p->n; i++)
        assert_true(p->ops[i].op == NSBOX_MOP_MASK_FILE || p->ops[i].op == NSBOX_MOP_MASK_DIR ||
                    p->ops[i].op == NSBOX_MOP_READONLY);
    assert_int_equal(count(p, NSBOX_MOP_MASK_FILE, NULL), (int)list_len(nsbox_proc_masked_files));
    /* a bind into the image: its target resolved inside the image, no mount point made there */
    assert_true(p->ops[host].target_in_image);
    assert_string_equal(p->ops[host].src, "/run/ctr/hostname");
    assert_true(p->ops[host].attr & MOUNT_ATTR_RDONLY);
    assert_int_equal(count(p, NSBOX_MOP_FILE, "etc/hostname"), 0);
    /* a bind outside it: its mount point on nsbox's tmpfs, recursive */
    assert_true(idx(p, NSBOX_MOP_MKDIR, "data") >= 0 && idx(p, NSBOX_MOP_MKDIR, "data") < data);
    assert_false(p->ops[data].target_in_image);
    assert_true(p->ops[data].recursive);
    assert_int_equal(p->ops[data].attr, MOUNT_ATTR_NODEV);
    free(w);
}

/* An idmapped bind (the launcher's tree, cfg.mount_fds): attached from that descriptor, not
 * cloned from its path, and sealed when writable; the others as before. */
static void test_config_idmapped_binds(void **state)
{
    (void)state;
    static const struct nsbox_rootfs_mount m[] = {
        {"/vol", "bind", "/srv/vol", MS_NOSUID | MS_NODEV, true, false, "", {0}},
        {"/ro", "bind", "/srv/ro", MS_RDONLY | MS_NOSUID | MS_NODEV, false, false, "", {0}},
        {"/plain", "bind", "/srv/plain", 0, true, false, "", {0}},
    };
    static const int fds[] = {7, 8, -1};
    struct world *w = config_world(m, 3);
    w->cfg.mount_fds = fds;
    struct nsbox_err e = {0};
    if (nsbox_mount_plan_build(&w->cfg, &w->plan, &e) < 0)
        fail_msg("%s", e.msg);
    const struct nsbox_mount_plan *p = &w->plan;
    const struct nsbox_mount_op *vol = &p->ops[idx(p, NSBOX_MOP_BIND, "vol")];
    const struct nsbox_mount_op *ro = &p->ops[idx(p, NSBOX_MOP_BIND, "ro")];
    const struct nsbox_mount_op *plain = &p->ops[idx(p, NSBOX_MOP_BIND, "plain")];
    assert_int_equal(vol->src_fd, 7);
    assert_false(vol->late);
    assert_true(vol->seal);
    assert_int_equal(ro->src_fd, 8);
    assert_false(ro->seal); /* read-only: nothing there can be rewritten */
    assert_int_equal(plain->src_fd, -1);
    assert_true(plain->late);
    assert_false(plain->seal);
    /* a tree for anything but a bind is the launcher's mistake */
    static const struct nsbox_rootfs_mount t[] = {
        {"/t", "tmpfs", "tmpfs", 0, false, false, "", {0}}};
    static const int tfd[] = {9};
    struct world *w2 = config_world(t, 1);
    w2->cfg.mount_fds = tfd;
    assert_int_equal(nsbox_mount_plan_build(&w2->cfg, &w2->plan, &e), -1);
    free(w2);
    free(w);
}

/* A proc the config mounts anywhere (a second one at /tmp/p, or its only one there) gets the
 * floor's masks and read-only paths as /proc does, after every mount: unmasked, its sys/ was
 * writable where /proc/sys is read-only. */
static void test_config_every_proc_masked(void **state)
{
    (void)state;
    static const struct nsbox_rootfs_mount two[] = {
        {"/proc", "proc", "proc", 0, false, false, "", {0}},
        {"/tmp/p", "proc", "proc", 0, false, false, "", {0}},
        {"/data", "bind", "/srv/data", 0, true, false, "", {0}},
    };
    static const struct nsbox_rootfs_mount only[] = {
        {"/p2", "proc", "proc", 0, false, false, "", {0}},
    };
    struct nsbox_err e = {0};
    struct world *w = config_world(two, 3);
    if (nsbox_mount_plan_build(&w->cfg, &w->plan, &e) < 0)
        fail_msg("%s", e.msg);
    const struct nsbox_mount_plan *p = &w->plan;
    int data = idx(p, NSBOX_MOP_BIND, "data");
    for (const char *const *n = nsbox_proc_masked_files; *n; n++) {
        char at[64];
        snprintf(at, sizeof at, "tmp/p/%s", *n);
        assert_true(idx(p, NSBOX_MOP_MASK_FILE, at) > data);
    }
    int sys = idx(p, NSBOX_MOP_READONLY, "tmp/p/sys");
    assert_true(sys > data && p->ops[sys].recursive && (p->ops[sys].attr & MOUNT_ATTR_RDONLY));
    assert_true(idx(p, NSBOX_MOP_MASK_DIR, "tmp/p/acpi") > data);
    assert_true(idx(p, NSBOX_MOP_READONLY, "proc/sys") > data);
    assert_int_equal(count(p, NSBOX_MOP_PROC, NULL), 2);
    free(w);
    /* no proc at /proc: nsbox's there, and the config's elsewhere masked as well */
    w = config_world(only, 1);
    if (nsbox_mount_plan_build(&w->cfg, &w->plan, &e) < 0)
        fail_msg("%s", e.msg);
    p = &w->plan;
    assert_true(idx(p, NSBOX_MOP_PROC, "proc") >= 0 && idx(p, NSBOX_MOP_PROC, "p2") >= 0);
    assert_true(idx(p, NSBOX_MOP_READONLY, "proc/sys") >= 0);
    assert_true(idx(p, NSBOX_MOP_READONLY, "p2/sys") > idx(p, NSBOX_MOP_PROC, "p2"));
    free(w);
}

/* No /proc, no /dev in the config: nsbox's own, so that the floor's masks have their /dev/null. */
static void test_config_without_proc_and_dev(void **state)
{
    (void)state;
    static const struct nsbox_rootfs_mount only[] = {
        {"/scratch", "tmpfs", "", 0, false, false, "size=1m", {0}}};
    struct world *w = config_world(only, 1);
    struct nsbox_err e = {0};
    if (nsbox_mount_plan_build(&w->cfg, &w->plan, &e) < 0)
        fail_msg("%s", e.msg);
    int dev = idx(&w->plan, NSBOX_MOP_TMPFS, "dev"), proc = idx(&w->plan, NSBOX_MOP_PROC, "proc");
    int scratch = idx(&w->plan, NSBOX_MOP_TMPFS, "scratch");
    assert_true(dev >= 0 && dev < scratch && scratch < proc);
    assert_string_equal(w->plan.ops[scratch].src, "tmpfs");
    assert_true(idx(&w->plan, NSBOX_MOP_MASK_FILE, "proc/kcore") > proc);
    free(w);
}

/* The config's maskedPaths and readonlyPaths: after every mount, on what nsbox or the config
 * mounted; inside the image, a read-only path is left as the image has it (read-only), and a
 * masked one is masked there, resolved in the new root (apply_in_root). */
static void test_config_masks(void **state)
{
    (void)state;
    static const char *const masked[] = {"/sys/firmware", "/proc/asound", "/etc/shadow"};
    static const char *const readonly[] = {"/proc/sys", "/sys/fs"};
    struct world *w = config_world(runc_spec, sizeof runc_spec / sizeof runc_spec[0]);
    w->cfg.masked = masked;
    w->cfg.n_masked = 3;
    w->cfg.readonly = readonly;
    w->cfg.n_readonly = 2;
    struct nsbox_err e = {0};
    if (nsbox_mount_plan_build(&w->cfg, &w->plan, &e) < 0)
        fail_msg("%s", e.msg);
    const struct nsbox_mount_plan *p = &w->plan;
    int fw = idx(p, NSBOX_MOP_MASK, "sys/firmware"), snd = idx(p, NSBOX_MOP_MASK, "proc/asound");
    int sys = idx(p, NSBOX_MOP_READONLY, "sys/fs"), data = idx(p, NSBOX_MOP_BIND, "data");
    assert_true(fw > data && snd > fw && sys > snd);
    assert_true(p->ops[fw].optional && p->ops[sys].recursive);
    assert_true(p->ops[sys].attr & MOUNT_ATTR_RDONLY);
    int shadow = idx(p, NSBOX_MOP_MASK, "etc/shadow"); /* inside the image */
    assert_true(shadow > snd && p->ops[shadow].target_in_image && p->ops[shadow].optional);
    assert_false(p->ops[fw].target_in_image); /* on a filesystem the config mounted */
    free(w);
}

static void refused(const struct nsbox_rootfs_mount *m, int code, const char *want)
{
    struct world *w = config_world(m, 1);
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_mount_plan_build(&w->cfg, &w->plan, &e), -1);
    assert_int_equal(e.code, code);
    if (!strstr(e.msg, want))
        fail_msg("'%s' does not say '%s'", e.msg, want);
    free(w);
}

static void test_config_refusals(void **state)
{
    (void)state;
    const struct nsbox_rootfs_mount cases[] = {
        {"/etc/ssl", "tmpfs", "tmpfs", 0, false, false, "", {0}},
        {"/", "tmpfs", "tmpfs", 0, false, false, "", {0}},
        {"/x/../etc", "bind", "/srv", 0, false, false, "", {0}},
        {"/x//y", "tmpfs", "tmpfs", 0, false, false, "", {0}},
        {"/mnt", "nfs", "server:/x", 0, false, false, "", {0}},
        {"/mnt", "bind", "relative", 0, false, false, "", {0}},
    };
    refused(&cases[0], NSBOX_E_UNSUPPORTED, "lies inside the image, where nsbox-oci only binds");
    refused(&cases[1], NSBOX_E_UNSUPPORTED, "a mount on / is not supported");
    refused(&cases[2], NSBOX_E_INVALID, "not a clean absolute path");
    refused(&cases[3], NSBOX_E_INVALID, "not a clean absolute path");
    refused(&cases[4], NSBOX_E_UNSUPPORTED, "type 'nfs' (at /mnt) is not supported");
    refused(&cases[5], NSBOX_E_INVALID, "needs an absolute source");
}

/* With network none nsbox's /etc/hosts is a text bound inside, its name removed, and nothing
 * can be mounted on it: a config that binds its own /etc/hosts (Podman does) has that alone;
 * without one, nsbox's. */
static void test_config_hosts_replaces_nsbox_hosts_text(void **state)
{
    (void)state;
    static const struct nsbox_rootfs_mount own[] = {
        {"/proc", "proc", "proc", 0, false, false, "", {0}},
        {"/etc/hosts", "bind", "/run/ctr/hosts", MS_RDONLY, false, true, "", {0}},
    };
    for (size_t n = 1; n <= 2; n++) {
        struct world *w = config_world(own, n);
        w->cfg.hosts_text = "127.0.0.1\tlocalhost\n";
        w->cfg.hosts_optional = true;
        struct nsbox_err e = {0};
        if (nsbox_mount_plan_build(&w->cfg, &w->plan, &e) < 0)
            fail_msg("%s", e.msg);
        assert_int_equal(count(&w->plan, NSBOX_MOP_BIND_TEXT, NULL), n == 1 ? 1 : 0);
        assert_int_equal(idx(&w->plan, NSBOX_MOP_BIND, "etc/hosts") >= 0, n == 2);
        free(w);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_order_and_floor),
        cmocka_unit_test(test_config_idmapped_binds),
        cmocka_unit_test(test_config_every_proc_masked),
        cmocka_unit_test(test_config_without_proc_and_dev),
        cmocka_unit_test(test_config_refusals),
        cmocka_unit_test(test_config_masks),
        cmocka_unit_test(test_config_hosts_replaces_nsbox_hosts_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
