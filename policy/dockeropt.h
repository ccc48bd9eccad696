/* What nsbox says to an option of `docker run` or `docker exec` (or `podman run`) that it does
 * not have (dockeropt.c): the way to the same end here, instead of a spelling suggestion that a
 * Docker habit would get ("-w: did you mean -e?"). */
#ifndef NSBOX_DOCKEROPT_H
#define NSBOX_DOCKEROPT_H

/* Where an interactive shell is: Docker's --interactive and --tty get it, and so do run's
 * -i and -t (cli/options.c), which are exec's. */
#define NSBOX_DOCKEROPT_SHELL                                                                      \
    "an interactive shell is id=$(nsbox create); nsbox exec -it $id -- bash (run passes its "      \
    "stdin through already)"

/* The sentence for option (its name, or "--name=value": the part before '=' counts), or NULL
 * when it is not one of Docker's that nsbox answers differently. */
const char *nsbox_dockeropt_hint(const char *option);

/* Whose habit option is, for the message: "docker", or "podman" for one of Podman's own run
 * options (--tls-verify). */
const char *nsbox_dockeropt_engine(const char *option);

#endif
