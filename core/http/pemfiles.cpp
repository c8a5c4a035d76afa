#include "http/pemfiles.h"

#include <QFile>

#include <algorithm>

namespace once {

namespace {

std::optional<QByteArray> readFile(const QString &path, QString *error)
{
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly)) {
        *error = QStringLiteral("cannot read %1: %2").arg(path, file.errorString());
        return std::nullopt;
    }
    // A PEM file of certificates or a key is a few KiB; anything far larger is not one.
    constexpr qint64 MaxBytes = 1024 * 1024;
    const QByteArray data = file.read(MaxBytes + 1);
    if (data.size() > MaxBytes) {
        *error = QStringLiteral("%1 is larger than 1 MiB, not a PEM file").arg(path);
        return std::nullopt;
    }
    return data;
}

} // namespace

std::optional<QList<QSslCertificate>> readPemCertificates(const QString &path, QString *error)
{
    const auto data = readFile(path, error);
    if (!data)
        return std::nullopt;
    const QList<QSslCertificate> certificates = QSslCertificate::fromData(*data, QSsl::Pem);
    if (certificates.isEmpty() || std::any_of(certificates.cbegin(), certificates.cend(),
                                              [](const QSslCertificate &c) { return c.isNull(); })) {
        *error = QStringLiteral("%1 holds no PEM certificate").arg(path);
        return std::nullopt;
    }
    return certificates;
}

std::optional<QSslKey> readPemPrivateKey(const QString &path, QString *error)
{
    const auto data = readFile(path, error);
    if (!data)
        return std::nullopt;
    for (const QSsl::KeyAlgorithm algorithm : {QSsl::Rsa, QSsl::Ec, QSsl::Dsa}) {
        const QSslKey key(*data, algorithm, QSsl::Pem, QSsl::PrivateKey);
        if (!key.isNull())
            return key;
    }
    // Says what is wrong without quoting any of it.
    *error = data->contains("ENCRYPTED")
                 ? QStringLiteral("%1 holds an encrypted private key; give it unencrypted (with access to the file "
                                  "restricted)")
                       .arg(path)
                 : QStringLiteral("%1 holds no PEM private key (RSA, EC or DSA)").arg(path);
    return std::nullopt;
}

} // namespace once
