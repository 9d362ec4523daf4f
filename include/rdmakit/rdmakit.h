/*
 * rdmakit/rdmakit.h - umbrella header: includes every public rdmakit header.
 */
#ifndef RDMAKIT_RDMAKIT_H
#define RDMAKIT_RDMAKIT_H

#include <rdmakit/common.h>
#include <rdmakit/version.h>

#endif
