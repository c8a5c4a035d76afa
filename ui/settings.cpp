#include "settings.h"

namespace once::ui {

namespace {
constexpr int MaxRecentStores = 8;
}

QStringList Settings::recentStores() const
{
    return m_settings.value(QStringLiteral("stores/recent")).toStringList();
}

void Settings::addRecentStore(const QString &url)
{
    QStringList recent = recentStores();
    recent.removeAll(url);
    recent.prepend(url);
    while (recent.size() > MaxRecentStores)
        recent.removeLast();
    m_settings.setValue(QStringLiteral("stores/recent"), recent);
}

} // namespace once::ui
