#include "settings.h"

#include "storeurl.h"

namespace once::ui {

namespace {
constexpr int MaxRecentStores = 8;
}

namespace {

QStringList withoutPasswords(const QStringList &urls)
{
    QStringList clean;
    for (const QString &url : urls) {
        const QString stripped = storeUrlWithoutPassword(url);
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

} // namespace once::ui
