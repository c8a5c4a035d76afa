#pragma once

#include <QList>
#include <QSslCertificate>
#include <QSslKey>
#include <QString>

#include <optional>

namespace once {

// PEM files for TLS, read once at start, each refused with one line that names the file
// and never its content (a key is a secret).
std::optional<QList<QSslCertificate>> readPemCertificates(const QString &path, QString *error);
std::optional<QSslKey> readPemPrivateKey(const QString &path, QString *error);

} // namespace once
