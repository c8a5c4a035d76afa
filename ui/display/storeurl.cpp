#include "display/storeurl.h"

#include "store/database.h"

#include <QCoreApplication>
#include <QFileInfo>
#include <QRegularExpression>
#include <QUrl>

namespace once::ui {

namespace {

// For text that QUrl will not take apart: "scheme://user:anything@" becomes
// "scheme://user@". Up to the last "@", so that a password with a stray "@" or "/" in it
// goes too: better to hide part of a broken URL than part of a password.
QString stripPasswordByHand(const QString &url)
{
    static const QRegularExpression userInfo(QStringLiteral("^([a-zA-Z][a-zA-Z0-9+.-]*://[^:/@?#]*):.*@"));
    QString stripped = url;
    stripped.replace(userInfo, QStringLiteral("\\1@"));
    return stripped;
}

// QUrl reads one host: a PostgreSQL URL with several (postgres://u@h1:5432,h2:5432/db)
// is edited with a placeholder in their place (*hosts gets them), then given them back.
QString withOneHost(const QString &url, QString *hosts)
{
    const UrlHostList list = urlHostList(url);
    const QString found = url.mid(list.start, list.size);
    if (!isPostgresUrl(url) || !found.contains(QLatin1Char(',')))
        return url;
    *hosts = found;
    QString one = url;
    return one.replace(list.start, list.size, QStringLiteral("hosts.invalid"));
}

QString withHostsBack(const QString &url, const QString &hosts)
{
    if (hosts.isEmpty())
        return url;
    const UrlHostList list = urlHostList(url);
    QString text = url;
    return text.replace(list.start, list.size, hosts);
}

} // namespace

bool isPostgresUrl(const QString &url)
{
    return url.startsWith(QLatin1String("postgres://")) || url.startsWith(QLatin1String("postgresql://"));
}

QString storeDisplayName(const QString &url)
{
    QString error;
    if (const auto location = StoreLocation::parse(url, &error))
        return location->displayName();
    return storeUrlWithoutPassword(url);
}

QString storeUrlWithoutPassword(const QString &url)
{
    if (!url.contains(QLatin1String("://")))
        return url; // a file: nothing secret in it
    QString hosts;
    QUrl parsed(withOneHost(url, &hosts), QUrl::StrictMode);
    if (!parsed.isValid())
        return stripPasswordByHand(url);
    if (parsed.password().isEmpty())
        return url; // as typed, rather than as QUrl would re-encode it
    parsed.setPassword(QString());
    return withHostsBack(parsed.toString(QUrl::FullyEncoded), hosts);
}

QString storePassword(const QString &url)
{
    if (!url.contains(QLatin1String("://")))
        return QString();
    QString hosts;
    return QUrl(withOneHost(url, &hosts), QUrl::StrictMode).password(QUrl::FullyDecoded);
}

QString storeUrlWithPassword(const QString &url, const QString &password)
{
    QString hosts;
    QUrl parsed(withOneHost(url, &hosts), QUrl::StrictMode);
    if (!parsed.isValid() || password.isEmpty())
        return url;
    parsed.setPassword(password, QUrl::DecodedMode);
    return withHostsBack(parsed.toString(QUrl::FullyEncoded), hosts);
}

QString storeShortName(const QString &url)
{
    QString error;
    const auto location = StoreLocation::parse(url, &error);
    if (!location)
        return storeDisplayName(url);
    if (location->kind == StoreLocation::Kind::Postgres)
        return QCoreApplication::translate("once::ui", "%1 on %2").arg(location->database, location->libpqHosts());
    return QFileInfo(location->path).fileName();
}

} // namespace once::ui
