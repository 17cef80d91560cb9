#pragma once
#include "config/config.h"
#include "train/trainer.h"
