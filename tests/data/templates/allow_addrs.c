/* Test program for rules/templates.py (written for this project): deny_addrs.c in allow
 * mode (a listed address with its side's flag drops, the rest passes). */
#define ALLOW_MODE
#include "deny_addrs.c"
