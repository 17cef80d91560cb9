#include "models/model.h"
#include "other.h"
