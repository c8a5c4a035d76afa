#pragma once

#include <QList>
#include <QSslCertificate>
#include <QSslConfiguration>
#include <QSslKey>
#include <QString>

#include <optional>

namespace once {

// How a worker reaches a partner over TLS when the system's certificate authorities are
// not the whole story: a partner behind a private CA, and partners that want a client
// certificate (mutual TLS). Empty means the system's CAs and no client certificate.
struct PartnerTls
{
    // Trusted instead of the system's CAs (as curl's --cacert), so that only the CA the
    // partner named can vouch for it.
    QList<QSslCertificate> caCertificates;
    // Ours, for mutual TLS: the first certificate is the client's, the rest its chain.
    QList<QSslCertificate> clientCertificates;
    QSslKey clientKey;

    bool isEmpty() const { return caCertificates.isEmpty() && clientCertificates.isEmpty(); }
    // Certificate verification stays on (peer and host name) whatever is set here.
    QSslConfiguration sslConfiguration() const;

    // Reads the files; empty paths are not used. A certificate needs its key and a key
    // its certificate. *error says which file and what is wrong with it.
    static std::optional<PartnerTls> load(const QString &caFile, const QString &certificateFile,
                                          const QString &keyFile, QString *error);
};

} // namespace once
