/* CTransfer.h - umbrella header of the engine. Includes only ct_*.h. */
#ifndef CTRANSFER_H
#define CTRANSFER_H
#include "ct_types.h"
#include "ct_counters.h"
#include "ct_transfer.h"
#include "ct_loop.h"
#include "ct_cookies.h"
#include "ct_tls.h"
#include "ct_digest.h"
#include "ct_netlink.h"
#include "ct_journal.h"
#endif
