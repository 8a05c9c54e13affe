// warpflash: exact attention for NVIDIA Hopper (sm_90a). Include this one header.
#pragma once

#include "warpflash/backward.h"
#include "warpflash/forward.h"
#include "warpflash/kvcache.h"
#include "warpflash/quantize.h"
#include "warpflash/status.h"
#include "warpflash/tensor.h"
