/* Fuzz exec's process.json and update's resources (policy/ociproc.c): any byte string, read as
 * both. Besides crashes and leaks (ASan), it checks what nsbox-oci relies on when one parses: a
 * process's NULL-terminated, non-empty argv, env entries with a '=', an absolute cwd; a cpu
 * period only with a cpu limit asked for; neither holds a NUL, raw or escaped, at which cJSON
 * would have cut a string. The same bytes as LISTEN_FDS (up to a NUL) give a
 * count within the bound asked for, or a reason. */
#include "cstring.h"
#include "nsbox.h"
#include "ociproc.h"
#include "spec.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct nsbox_ocispec c;
    struct nsbox_err e;
    struct nsbox_err nul;
    bool has_nul = nsbox_spec_json_check_nul((const char *)data, size, &nul) < 0;
    if (nsbox_ociproc_parse_process((const char *)data, size, &c, &e) == 0) {
        if (has_nul || c.n_args == 0 || !c.args[0] || !c.args[0][0] || c.args[c.n_args] || c.cwd[0] != '/' ||
            c.n_env > NSBOX_OCISPEC_ENV_MAX)
            abort();
        for (size_t i = 0; i < c.n_env; i++)
            if (!strchr(c.env[i], '=') || c.env[i][0] == '=')
                abort();
        nsbox_ocispec_free(&c);
    } else if (c.args || c.n_env || !e.msg[0]) {
        abort(); /* a failure frees what it had, and says why */
    }
    struct nsbox_ociproc_resources r;
    if (nsbox_ociproc_parse_resources((const char *)data, size, &r, &e) == 0) {
        if (has_nul || (r.cpu_period_us && !r.has_cpu) || r.has_swap != (r.swap_bytes != 0))
            abort();
    } else if (!e.msg[0]) {
        abort();
    }
    char *fds = cstring_dup(data, size < 63 ? size : 63);
    unsigned listen = 1;
    int got = nsbox_ociproc_listen_fds("7", fds, 7, 250, &listen, &e);
    free(fds);
    if ((got == 0 && listen > 250) || (got < 0 && (listen || !e.msg[0])))
        abort();
    return 0;
}
