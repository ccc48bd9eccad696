/* What nsbox says to an option of `docker run` or `docker exec` that it does not have
 * (dockeropt.c): the way to the same end here, instead of a spelling suggestion that a Docker
 * habit would get ("-w: did you mean -e?"). */
#ifndef NSBOX_DOCKEROPT_H
#define NSBOX_DOCKEROPT_H

/* The sentence for option (its name, or "--name=value": the part before '=' counts), or NULL
 * when it is not one of Docker's that nsbox answers differently. */
const char *nsbox_dockeropt_hint(const char *option);

#endif
