/*
 * rdmakit/rdmakit.h - umbrella header: includes every public rdmakit header.
 */
#ifndef RDMAKIT_RDMAKIT_H
#define RDMAKIT_RDMAKIT_H

#include <rdmakit/common.h>
#include <rdmakit/version.h>
#include <rdmakit/error.h>
#include <rdmakit/explain.h>
#include <rdmakit/log.h>
#include <rdmakit/device.h>
#include <rdmakit/pd.h>
#include <rdmakit/mr.h>
#include <rdmakit/pool.h>
#include <rdmakit/cq.h>
#include <rdmakit/oob.h>
#include <rdmakit/conn.h>
#include <rdmakit/cm.h>
#include <rdmakit/post.h>
#include <rdmakit/wait.h>
#include <rdmakit/msgbuf.h>
#include <rdmakit/ring.h>
#include <rdmakit/xfer.h>
#include <rdmakit/rpc.h>
#include <rdmakit/rpc_pool.h>
#include <rdmakit/wire.h>

#endif
