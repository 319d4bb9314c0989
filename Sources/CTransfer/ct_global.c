#include "ct_internal.h"
