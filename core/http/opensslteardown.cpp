#include "http/opensslteardown.h"

#include <openssl/crypto.h>

namespace once {

bool skipOpenSslTeardownAtExit()
{
    return OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, nullptr) == 1;
}

} // namespace once
