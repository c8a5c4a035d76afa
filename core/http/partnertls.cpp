#include "http/partnertls.h"

#include "http/pemfiles.h"

#include <QSslSocket>

namespace once {

QSslConfiguration PartnerTls::sslConfiguration() const
{
    QSslConfiguration configuration = QSslConfiguration::defaultConfiguration();
    configuration.setPeerVerifyMode(QSslSocket::VerifyPeer);
    if (!caCertificates.isEmpty())
        configuration.setCaCertificates(caCertificates);
    if (!clientCertificates.isEmpty()) {
        configuration.setLocalCertificateChain(clientCertificates);
        configuration.setPrivateKey(clientKey);
    }
    return configuration;
}

std::optional<PartnerTls> PartnerTls::load(const QString &caFile, const QString &certificateFile,
                                           const QString &keyFile, QString *error)
{
    PartnerTls tls;
    if (certificateFile.isEmpty() != keyFile.isEmpty()) {
        *error = QStringLiteral("a partner certificate needs its key, and a key its certificate");
        return std::nullopt;
    }
    const auto failed = [error](const QString &what) {
        *error = what + QStringLiteral(": ") + *error;
        return std::nullopt;
    };
    if (!caFile.isEmpty()) {
        const auto certificates = readPemCertificates(caFile, error);
        if (!certificates)
            return failed(QStringLiteral("partner CA"));
        tls.caCertificates = *certificates;
    }
    if (!certificateFile.isEmpty()) {
        const auto certificates = readPemCertificates(certificateFile, error);
        if (!certificates)
            return failed(QStringLiteral("partner certificate"));
        const auto key = readPemPrivateKey(keyFile, error);
        if (!key)
            return failed(QStringLiteral("partner key"));
        tls.clientCertificates = *certificates;
        tls.clientKey = *key;
    }
    return tls;
}

} // namespace once
