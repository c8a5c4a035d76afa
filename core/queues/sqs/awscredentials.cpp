#include "queues/sqs/awscredentials.h"

#include <QDir>
#include <QFile>

namespace once {

namespace {

// The INI file of the AWS CLI: [profile] sections of key = value lines; comments start
// with # or ;. Only the three keys of a static credential are read.
std::optional<AwsCredentials> fromCredentialsFile(const QString &path, const QString &profile, QString *error)
{
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly)) {
        *error = QStringLiteral("no AWS credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set, and %1 "
                                "cannot be read (%2)")
                     .arg(path, file.errorString());
        return std::nullopt;
    }
    AwsCredentials credentials;
    bool inProfile = false;
    bool found = false;
    while (!file.atEnd()) {
        const QByteArray line = file.readLine().trimmed();
        if (line.isEmpty() || line.startsWith('#') || line.startsWith(';'))
            continue;
        if (line.startsWith('[') && line.endsWith(']')) {
            inProfile = line.mid(1, line.size() - 2).trimmed() == profile.toUtf8();
            found = found || inProfile;
            continue;
        }
        const qsizetype equals = line.indexOf('=');
        if (!inProfile || equals < 0)
            continue;
        const QByteArray key = line.left(equals).trimmed();
        const QByteArray value = line.mid(equals + 1).trimmed();
        if (key == "aws_access_key_id")
            credentials.accessKeyId = value;
        else if (key == "aws_secret_access_key")
            credentials.secretAccessKey = value;
        else if (key == "aws_session_token")
            credentials.sessionToken = value;
    }
    if (!found) {
        *error = QStringLiteral("no AWS credentials: no profile [%1] in %2 (AWS_PROFILE names it)").arg(profile, path);
        return std::nullopt;
    }
    if (credentials.accessKeyId.isEmpty() || credentials.secretAccessKey.isEmpty()) {
        *error = QStringLiteral("the AWS profile [%1] in %2 has no aws_access_key_id and aws_secret_access_key").arg(profile, path);
        return std::nullopt;
    }
    return credentials;
}

} // namespace

std::optional<AwsCredentials> loadAwsCredentials(QString *error)
{
    const QByteArray keyId = qgetenv("AWS_ACCESS_KEY_ID");
    const QByteArray secret = qgetenv("AWS_SECRET_ACCESS_KEY");
    if (!keyId.isEmpty() || !secret.isEmpty()) {
        if (keyId.isEmpty() || secret.isEmpty()) {
            *error = QStringLiteral("AWS credentials need both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; only %1 is set")
                         .arg(keyId.isEmpty() ? QStringLiteral("AWS_SECRET_ACCESS_KEY") : QStringLiteral("AWS_ACCESS_KEY_ID"));
            return std::nullopt;
        }
        return AwsCredentials{keyId, secret, qgetenv("AWS_SESSION_TOKEN")};
    }
    QString path = qEnvironmentVariable("AWS_SHARED_CREDENTIALS_FILE");
    if (path.isEmpty())
        path = QDir::homePath() + QStringLiteral("/.aws/credentials");
    QString profile = qEnvironmentVariable("AWS_PROFILE");
    if (profile.isEmpty())
        profile = QStringLiteral("default");
    return fromCredentialsFile(path, profile, error);
}

} // namespace once
