// The audit log's public face: the writer, the verifier and the timeline, with the record catalog.
#pragma once

#include "audit/records.h"
#include "audit/show.h"
#include "audit/summary.h"
#include "audit/verify.h"
#include "audit/writer.h"
