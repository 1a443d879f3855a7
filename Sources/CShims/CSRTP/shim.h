// libsrtp2.
#pragma once
#include <srtp2/srtp.h>
