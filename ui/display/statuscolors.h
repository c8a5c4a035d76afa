#pragma once

#include <QColor>

class QPalette;

namespace once::ui {

// How worrying a number or a message is. The colours for each level are chosen against
// the current palette, so the same level reads on a light and on a dark theme.
enum class Severity
{
    Normal,
    Good,
    Warning,
    Alert
};

struct BannerColors
{
    QColor background;
    QColor text;
    QColor border;
};

bool isDarkPalette(const QPalette &palette);
// Text of this severity drawn on the palette's Base or Window colour.
QColor severityTextColor(Severity severity, const QPalette &palette);
// A filled strip of this severity (the alert banner).
BannerColors bannerColors(Severity severity, const QPalette &palette);

} // namespace once::ui
