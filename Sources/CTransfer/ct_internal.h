/* ct_internal.h - private declarations shared by the engine's .c files. */
#ifndef CT_INTERNAL_H
#define CT_INTERNAL_H
#include "CTransfer.h"
#endif
