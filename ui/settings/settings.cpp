#include "settings/settings.h"

#include "display/queueurl.h"
#include "display/storeurl.h"

namespace once::ui {

namespace {
constexpr int MaxRecentStores = 8;
constexpr int MaxRecentQueues = 8;
const QString RecentQueuesKey = QStringLiteral("queues/recent");
} // namespace

namespace {

QStringList withoutPasswords(const QStringList &urls,
                             QString (*strip)(const QString &) = storeUrlWithoutPassword)
{
    QStringList clean;
    for (const QString &url : urls) {
        const QString stripped = strip(url);
        if (!stripped.isEmpty() && !clean.contains(stripped))
            clean.append(stripped);
    }
    return clean;
}

} // namespace

QStringList Settings::recentStores() const
{
    return withoutPasswords(m_settings.value(QStringLiteral("stores/recent")).toStringList());
}

void Settings::scrubRecentStores()
{
    const QStringList saved = m_settings.value(QStringLiteral("stores/recent")).toStringList();
    if (const QStringList clean = withoutPasswords(saved); clean != saved)
        m_settings.setValue(QStringLiteral("stores/recent"), clean);
}

void Settings::addRecentStore(const QString &url)
{
    const QString saved = storeUrlWithoutPassword(url);
    QStringList recent = recentStores();
    recent.removeAll(saved);
    recent.prepend(saved);
    while (recent.size() > MaxRecentStores)
        recent.removeLast();
    m_settings.setValue(QStringLiteral("stores/recent"), recent);
}

void Settings::setPasswordRemembered(const QString &savedUrl, bool remembered)
{
    QStringList urls = rememberedPasswords();
    urls.removeAll(savedUrl);
    if (remembered)
        urls.append(savedUrl);
    m_settings.setValue(QStringLiteral("passwords/remembered"), urls);
}

QStringList Settings::recentQueues() const
{
    return withoutPasswords(m_settings.value(RecentQueuesKey).toStringList(), queueUrlWithoutPassword);
}

void Settings::scrubRecentQueues()
{
    const QStringList saved = m_settings.value(RecentQueuesKey).toStringList();
    if (const QStringList clean = withoutPasswords(saved, queueUrlWithoutPassword); clean != saved)
        m_settings.setValue(RecentQueuesKey, clean);
}

void Settings::addRecentQueue(const QString &url)
{
    const QString saved = queueUrlWithoutPassword(url);
    QStringList recent = recentQueues();
    recent.removeAll(saved);
    recent.prepend(saved);
    while (recent.size() > MaxRecentQueues)
        recent.removeLast();
    m_settings.setValue(RecentQueuesKey, recent);
}

} // namespace once::ui
