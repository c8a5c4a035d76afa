#pragma once

namespace once {

// Stops OpenSSL from tearing itself down at exit. By default its first use registers
// OPENSSL_cleanup with atexit(), which frees every thread's OpenSSL state, including that of
// a thread that QThread::wait() has already seen finish but that is still running its
// thread-local destructors: OpenSSL's own then frees the same memory again, and the process
// dies of "double free" after its work is done (a worker's store thread touches OpenSSL
// through Qt's TLS configuration and the Pub/Sub signer). The kernel frees a process's memory
// anyway. Returns false if OpenSSL could not be initialised.
//
// Call once, early in main(), before anything uses TLS or libcrypto: only the first
// initialisation decides.
bool skipOpenSslTeardownAtExit();

} // namespace once
